//! Every bound of the front end, in one place.
//!
//! Bad input (binary files, megabyte lines, deep nesting) must end in a diagnostic, never in
//! a panic, a stack overflow or a hang; these numbers are what make that true.

/// Largest source file accepted, in bytes.
pub const SOURCE_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Deepest nesting of blocks, brackets and unary operators the parser follows.
pub const NESTING_DEPTH_MAX: u32 = 64;
/// Diagnostics reported per file before the rest are dropped with one note.
pub const DIAGNOSTICS_PER_FILE_MAX: usize = 100;
/// Lexical errors reported per file; later ones are counted but not reported.
pub const LEX_ERRORS_MAX: usize = 20;
/// Files pulled in through `include`, transitively, per checked program.
pub const INCLUDED_FILES_MAX: usize = 64;
/// Widest slice of a source line shown under a diagnostic, in characters.
pub const SNIPPET_COLUMNS_MAX: usize = 100;
/// Longest name for which "did you mean" suggestions are computed, in bytes.
pub const SUGGESTION_NAME_BYTES_MAX: usize = 64;
/// Longest identifier accepted, in bytes (names appear in messages, so they stay short).
pub const IDENT_BYTES_MAX: usize = 256;
