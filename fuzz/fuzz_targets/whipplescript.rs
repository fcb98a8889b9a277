//! The WhippleScript front end on arbitrary text: lexer, parser, checker and lowering
//! (`whip_engine::cli::check_source`, what `whip check` runs), then every diagnostic
//! rendered as text and JSON and the lowered program explained. Must never panic, loop or
//! recurse without bound (engine/src/lib.rs). The program's path lies in a directory that
//! does not exist, so relative includes fail fast; absolute ones read bounded regular files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use whip_engine::cli::check_source;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let report = check_source("/nonexistent-whip-fuzz/main.whip", &src, None);
    for d in &report.diags {
        let _ = report.sources.render(d);
        let _ = report.sources.to_json(d);
    }
    if let Some(ir) = &report.ir {
        let _ = ir.explain();
    }
});
