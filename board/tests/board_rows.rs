//! Goal: a prefetching worker's cycle writes fewer rows than the one-task loop, and both
//! complete every task exactly once. Method: the same board of 64 tasks worked to the end
//! twice, by complete-and-claim-next (one task per write) and by `BoardClaimMany` with a
//! prefetch of 16; each apply's written rows are counted as the cell's write set stores
//! them (a key written twice in one apply is one row), and divided by the tasks completed.

use std::collections::BTreeSet;

use whip_board::{BoardSettings, Command, Completion, MemTxn, Outcome, Request, Stamp, Txn, apply};

/// A store that remembers which keys the current apply wrote.
#[derive(Default)]
struct Counting {
    inner: MemTxn,
    written: BTreeSet<Vec<u8>>,
}

impl Txn for Counting {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.written.insert(key.to_vec());
        self.inner.put(key, value);
    }
    fn delete(&mut self, key: &[u8]) {
        self.written.insert(key.to_vec());
        self.inner.delete(key);
    }
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner.scan(start, end, limit)
    }
}

const TASKS: usize = 64;

struct Board {
    txn: Counting,
    index: u64,
    /// Rows written by the worker's applies (not the setup's).
    rows: usize,
    completed: usize,
}

impl Board {
    /// A team `t` of supervisor `a` with `TASKS` ready tasks.
    fn new() -> Self {
        let mut board = Board {
            txn: Counting::default(),
            index: 0,
            rows: 0,
            completed: 0,
        };
        board.apply(Command::TeamCreate {
            team: "t".into(),
            caller: "a".into(),
            parent: None,
            ancestors: Vec::new(),
            settings: BoardSettings::default(),
        });
        let bodies = (0..TASKS)
            .map(|i| format!("{{\"n\":{i}}}").into_bytes())
            .collect();
        board.apply(Command::BoardPostMany {
            team: "t".into(),
            caller: "a".into(),
            bodies,
        });
        board.rows = 0;
        board
    }

    fn apply(&mut self, command: Command) -> Outcome {
        self.index += 1;
        self.txn.written.clear();
        let stamp = Stamp::of_request(self.index, 0, 1_000_000 + self.index);
        let outcome = apply(&mut self.txn, stamp, &Request::server(None, command)).outcome;
        self.rows += self.txn.written.len();
        outcome
    }

    fn rows_per_task(&self) -> f64 {
        self.rows as f64 / self.completed as f64
    }
}

/// Complete-and-claim-next until the board is empty.
fn one_at_a_time() -> Board {
    let mut board = Board::new();
    let claim = Command::BoardClaim {
        team: "t".into(),
        caller: "a".into(),
        worker: "w".into(),
    };
    let mut answer = board.apply(claim);
    while let Outcome::TaskClaimed { task, fence, .. } = answer {
        answer = board.apply(Command::BoardCompleteAndClaim {
            team: "t".into(),
            caller: "a".into(),
            task_id: task.id,
            fence,
            result: b"{}".to_vec(),
            worker: "w".into(),
        });
        board.completed += 1;
    }
    assert_eq!(answer, Outcome::BoardEmpty);
    board
}

/// A worker holding up to 16 claims, completing them all and claiming 16 more per write.
fn prefetching() -> Board {
    let mut board = Board::new();
    let mut completes = Vec::new();
    loop {
        let answer = board.apply(Command::BoardClaimMany {
            team: "t".into(),
            caller: "a".into(),
            worker: "w".into(),
            completes: std::mem::take(&mut completes),
            max: 16,
            claim_ms: 0,
        });
        let Outcome::TasksClaimed { completed, claims } = answer else {
            panic!("a prefetching claim answered {answer:?}");
        };
        board.completed += completed.len();
        if claims.is_empty() {
            return board;
        }
        completes = claims
            .into_iter()
            .map(|c| Completion {
                task_id: c.task.id,
                fence: c.fence,
                result: b"{}".to_vec(),
            })
            .collect();
    }
}

#[test]
fn a_prefetching_worker_writes_fewer_rows_per_task() {
    let one = one_at_a_time();
    let many = prefetching();
    assert_eq!((one.completed, many.completed), (TASKS, TASKS));
    let (one_rows, many_rows) = (one.rows_per_task(), many.rows_per_task());
    println!("rows written per task: one at a time {one_rows:.2}, prefetch 16 {many_rows:.2}");
    assert!(
        many_rows < one_rows,
        "prefetch 16 wrote {many_rows:.2} rows per task, one at a time {one_rows:.2}"
    );
    // Both boards end in the same state: every task done, none ready or claimed.
    for board in [&one, &many] {
        let stats = whip_board::query(
            &board.txn.inner,
            2_000_000,
            &whip_board::Query::BoardStats { team: "t".into() },
        );
        let whip_board::QueryResult::BoardStats(Some(s)) = stats else {
            panic!("no stats: {stats:?}");
        };
        assert_eq!((s.ready, s.claimed, s.done), (0, 0, TASKS as u64));
    }
}
