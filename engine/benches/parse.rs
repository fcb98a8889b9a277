//! Parsing (and checking) 10,000 lines of WhippleScript must take well under 100 ms in
//! release. The input repeats the seed programs' rules under fresh names.

use criterion::{Criterion, criterion_group, criterion_main};

const RULE: &str = "
rule ship_N
  when Deploy as d where d.env == \"prod\" and count(Deploy where service == d.service) > 0
=> {
  acquire deploy_slot for d.env wait 30s as slot

  after slot held {
    timer 5s as deploying

    after deploying completes {
      release slot
      done d
      complete result {
        note \"deployed {{ d.service }}\"
      }
    }
  }

  after slot contended {
    done d
    complete result {
      note \"skipped: deploy slot busy\"
    }
  }
}
";

/// A program of at least `lines` lines.
fn program(lines: usize) -> String {
    let head = include_str!("../tests/check/valid/seed_lease_ship.whip");
    let mut src = head.to_string();
    let mut n = 0;
    while src.lines().count() < lines {
        src.push_str(&RULE.replace("ship_N", &format!("ship_{n}")));
        n += 1;
    }
    src
}

fn bench(c: &mut Criterion) {
    let src = program(10_000);
    c.bench_function("parse 10k lines", |b| {
        b.iter(|| whip_engine::syntax::parse_file(std::hint::black_box(&src), 0))
    });
    c.bench_function("check 10k lines", |b| {
        b.iter(|| whip_engine::cli::check_source("bench.whip", std::hint::black_box(&src), None))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
