//! What the fuzz targets share: writing a target's seed corpus on request.

use std::path::Path;

/// With `WHIP_FUZZ_SEEDS=DIR` set, write the target's seeds into DIR (made if missing) and
/// exit: `WHIP_FUZZ_SEEDS=fuzz/corpus/T cargo +nightly fuzz run -s none T -- -runs=0`.
/// Called from a target's `init`, before any input runs.
pub fn write_seeds_if_asked(write: fn(&Path)) {
    let Ok(dir) = std::env::var("WHIP_FUZZ_SEEDS") else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).expect("seed directory");
    write(dir);
    std::process::exit(0);
}
