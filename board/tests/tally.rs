//! Goal: each tally method gives the published answer on worked examples, breaks ties by
//! the documented rule, and the quorum and threshold matrix decides the outcome exactly.
//! Method: ballots built from the examples' preference profiles ("5 × ACBED"), counted by
//! `whip_board::tally::count`; outcomes by `whip_board::vote::decide`.

use whip_board::tally::{Fraction, Method, RoundKind, Threshold, count};
use whip_board::vote::{CloseReason, Role, Rules, VoteOutcome, decide};

/// Ballots from a profile of `(voters, ranking)`, the ranking as letters `A`, `B`, ….
fn profile(groups: &[(usize, &str)]) -> Vec<Vec<u16>> {
    let mut ballots = Vec::new();
    for (voters, ranking) in groups {
        let ballot: Vec<u16> = ranking.bytes().map(|b| u16::from(b - b'A')).collect();
        ballots.extend(std::iter::repeat_n(ballot, *voters));
    }
    ballots
}

/// Wikipedia, "Schulze method", the example with 45 voters and 5 candidates: the
/// pairwise preferences, the strongest paths and the winner E.
#[test]
fn schulze_matches_the_45_voter_example() {
    let ballots = profile(&[
        (5, "ACBED"),
        (5, "ADECB"),
        (8, "BEDAC"),
        (3, "CABED"),
        (7, "CAEBD"),
        (2, "CBADE"),
        (7, "DCEBA"),
        (8, "EBADC"),
    ]);
    let result = count(Method::Schulze, 5, &ballots);
    let d = vec![
        vec![0, 20, 26, 30, 22],
        vec![25, 0, 16, 33, 18],
        vec![19, 29, 0, 17, 24],
        vec![15, 12, 28, 0, 14],
        vec![23, 27, 21, 31, 0],
    ];
    let p = vec![
        vec![0, 28, 28, 30, 24],
        vec![25, 0, 28, 33, 24],
        vec![25, 29, 0, 29, 24],
        vec![25, 28, 28, 0, 24],
        vec![25, 28, 28, 31, 0],
    ];
    assert_eq!(result.rounds[0].kind, RoundKind::Pairwise);
    assert_eq!(result.rounds[0].matrix, d);
    assert_eq!(result.rounds[1].kind, RoundKind::StrongestPaths);
    assert_eq!(result.rounds[1].matrix, p);
    assert_eq!(result.winner, Some(4), "E wins");
    // E's weakest pairwise contest is against C: 21 of 45 rank E above C.
    assert_eq!((result.support, result.base), (21, 45));
}

/// A Condorcet cycle (A beats B 6–3, B beats C 7–2, C beats A 5–4): no Condorcet winner,
/// and Schulze picks A, whose beat paths (6, 6) are stronger than those against it (5, 5).
#[test]
fn schulze_resolves_a_condorcet_cycle() {
    let ballots = profile(&[(4, "ABC"), (3, "BCA"), (2, "CAB")]);
    let result = count(Method::Schulze, 3, &ballots);
    let d = &result.rounds[0].matrix;
    assert!(
        d[0][1] > d[1][0] && d[1][2] > d[2][1] && d[2][0] > d[0][2],
        "a cycle"
    );
    assert_eq!(
        result.rounds[1].matrix,
        vec![vec![0, 6, 6], vec![5, 0, 7], vec![5, 5, 0]]
    );
    assert_eq!(result.winner, Some(0));
}

/// A perfectly symmetric cycle ties every option: the one listed first wins.
#[test]
fn schulze_breaks_a_full_tie_by_option_order() {
    let ballots = profile(&[(1, "ABC"), (1, "BCA"), (1, "CAB")]);
    assert_eq!(count(Method::Schulze, 3, &ballots).winner, Some(0));
    let reversed = profile(&[(1, "CBA"), (1, "BAC"), (1, "ACB")]);
    assert_eq!(count(Method::Schulze, 3, &reversed).winner, Some(0));
}

/// The Tennessee capital example (Wikipedia, "Instant-runoff voting"): Memphis 42,
/// Nashville 26, Chattanooga 15, Knoxville 17. A = Memphis, B = Nashville,
/// C = Chattanooga, D = Knoxville.
fn tennessee() -> Vec<Vec<u16>> {
    profile(&[(42, "ABCD"), (26, "BCDA"), (15, "CDBA"), (17, "DCBA")])
}

#[test]
fn irv_runs_three_rounds_on_the_tennessee_example() {
    let result = count(Method::Irv, 4, &tennessee());
    let rounds: Vec<(Vec<u64>, Option<u16>)> = result
        .rounds
        .iter()
        .map(|r| (r.counts.clone(), r.eliminated))
        .collect();
    assert_eq!(
        rounds,
        vec![
            (vec![42, 26, 15, 17], Some(2)),
            (vec![42, 26, 0, 32], Some(1)),
            (vec![42, 0, 0, 58], None),
        ]
    );
    assert_eq!(result.winner, Some(3), "Knoxville wins");
    assert_eq!((result.support, result.base), (58, 100));
}

/// The same profile under the other methods: plurality elects Memphis, Borda Nashville
/// (194, 173, 126, 107: Wikipedia, "Borda count"), Schulze the Condorcet winner Nashville.
#[test]
fn tennessee_under_plurality_borda_and_schulze() {
    let plurality: Vec<Vec<u16>> = tennessee().into_iter().map(|b| vec![b[0]]).collect();
    let result = count(Method::Plurality, 4, &plurality);
    assert_eq!((result.winner, result.support), (Some(0), 42));
    let borda = count(Method::Borda, 4, &tennessee());
    assert_eq!(borda.rounds[0].counts, vec![126, 194, 173, 107]);
    assert_eq!((borda.winner, borda.base), (Some(1), 300));
    assert_eq!(count(Method::Schulze, 4, &tennessee()).winner, Some(1));
}

#[test]
fn approval_counts_every_approved_option() {
    let ballots = vec![vec![0, 1], vec![1, 2], vec![1], vec![0, 2]];
    let result = count(Method::Approval, 3, &ballots);
    assert_eq!(result.rounds[0].counts, vec![2, 3, 2]);
    assert_eq!(
        (result.winner, result.support, result.base),
        (Some(1), 3, 4)
    );
}

#[test]
fn ties_go_to_the_option_listed_first() {
    let even = vec![vec![1], vec![0]];
    assert_eq!(count(Method::Plurality, 2, &even).winner, Some(0));
    assert_eq!(count(Method::Approval, 2, &[vec![0, 1]]).winner, Some(0));
    assert_eq!(
        count(Method::Borda, 2, &[vec![1, 0], vec![0, 1]]).winner,
        Some(0)
    );
}

/// An instant-runoff tie for the fewest votes is broken by the earlier rounds, then by
/// eliminating the option listed last.
#[test]
fn irv_elimination_ties_look_back_then_drop_the_last_listed() {
    // Round 1: A 3, B 2, C 2, D 1 → D goes (its voter ranks C next).
    // Round 2: A 3, B 2, C 3 → B goes; round 3: A 3 + B's 2 (next A) → A wins.
    let ballots = profile(&[(3, "A"), (2, "BA"), (2, "C"), (1, "DC")]);
    let result = count(Method::Irv, 4, &ballots);
    assert_eq!(result.rounds[0].eliminated, Some(3));
    assert_eq!(result.rounds[1].eliminated, Some(1));
    assert_eq!(result.winner, Some(0));
    // B and C tie now and tied in every round: the one listed last (C) goes.
    let tied = profile(&[(3, "A"), (2, "BA"), (2, "CB")]);
    let result = count(Method::Irv, 3, &tied);
    assert_eq!(result.rounds[0].eliminated, Some(2));
    assert_eq!(result.winner, Some(1), "B takes C's votes: 4 of 7");
    // A ballot whose ranked options are all out is exhausted.
    let exhausted = profile(&[(2, "A"), (2, "B"), (1, "C")]);
    let result = count(Method::Irv, 3, &exhausted);
    assert_eq!(result.rounds[1].exhausted, 1);
    assert_eq!(
        result.winner,
        Some(0),
        "A and B tie 2–2: B, listed last, goes"
    );
}

#[test]
fn choices_are_checked_against_the_method() {
    assert!(Method::Plurality.choice(3, vec![0, 1]).is_err());
    assert!(Method::Plurality.choice(3, vec![3]).is_err());
    assert!(Method::Borda.choice(3, vec![0, 0]).is_err());
    assert!(Method::Irv.choice(3, Vec::new()).is_err());
    assert_eq!(Method::Approval.choice(3, vec![2, 0]), Ok(vec![0, 2]));
    assert_eq!(Method::Schulze.choice(3, vec![2, 0]), Ok(vec![2, 0]));
}

#[test]
fn fractions_and_thresholds_parse_exactly() {
    assert_eq!(Fraction::parse("0.5"), Ok(Fraction { num: 1, den: 2 }));
    assert_eq!(Fraction::parse("2/3"), Ok(Fraction { num: 2, den: 3 }));
    assert_eq!(Fraction::parse("1"), Ok(Fraction { num: 1, den: 1 }));
    assert_eq!(
        Fraction::parse("0.666667"),
        Ok(Fraction {
            num: 666_667,
            den: 1_000_000
        })
    );
    for bad in ["1.5", "3/2", "x", "1/0", "-1", "0.1234567", "1e-3"] {
        assert!(Fraction::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(Threshold::parse("2/3"), Ok(Threshold::TwoThirds));
    assert_eq!(Threshold::parse("0.75"), Ok(Threshold::ThreeQuarters));
    assert_eq!(Threshold::parse("simple"), Ok(Threshold::Majority));
    assert!(Threshold::parse("0").is_err());
    // Majority is strictly more than half; a fraction is "at least".
    assert!(!Threshold::Majority.met(5, 10) && Threshold::Majority.met(6, 10));
    let half = Threshold::parse("0.5").unwrap();
    assert!(half.met(5, 10) && !half.met(4, 10));
    assert!(Threshold::TwoThirds.met(2, 3) && !Threshold::TwoThirds.met(199, 300));
    assert!(Threshold::ThreeQuarters.met(3, 4) && !Threshold::ThreeQuarters.met(74, 100));
    assert!(!Threshold::Majority.met(0, 0), "never over an empty base");
}

fn rules(method: Method, quorum: &str, threshold: &str) -> Rules {
    Rules {
        title: "t".into(),
        options: vec!["a".into(), "b".into(), "c".into()],
        method,
        electorate: vec![Role::Coordinator],
        quorum: Fraction::parse(quorum).unwrap(),
        threshold: Threshold::parse(threshold).unwrap(),
        duration_ms: 60_000,
        until_all_voted: false,
    }
}

/// The matrix: for an electorate of 6, each (quorum, threshold, ballots) gives one
/// outcome; quorum counts voters against the electorate, the threshold the winner's
/// support against the base.
#[test]
fn quorum_and_threshold_decide_the_outcome() {
    let at = (1_000, CloseReason::Deadline);
    let a = || vec![0u16];
    let b = || vec![1u16];
    let cases: Vec<(&str, &str, Vec<Vec<u16>>, VoteOutcome)> = vec![
        ("0.5", "majority", vec![a(), a()], VoteOutcome::NoQuorum),
        (
            "0.5",
            "majority",
            vec![a(), a(), b()],
            VoteOutcome::Passed { option: 0 },
        ),
        (
            "0.5",
            "2/3",
            vec![a(), a(), b()],
            VoteOutcome::Passed { option: 0 },
        ),
        ("0.5", "3/4", vec![a(), a(), b()], VoteOutcome::Failed),
        (
            "0.5",
            "majority",
            vec![a(), b(), a(), b()],
            VoteOutcome::Failed,
        ),
        (
            "0.5",
            "0.5",
            vec![a(), b(), a(), b()],
            VoteOutcome::Passed { option: 0 },
        ),
        ("1", "majority", vec![a(); 5], VoteOutcome::NoQuorum),
        ("1", "1", vec![a(); 6], VoteOutcome::Passed { option: 0 }),
        (
            "2/3",
            "majority",
            vec![a(), b(), b(), b()],
            VoteOutcome::Passed { option: 1 },
        ),
        ("0", "majority", Vec::new(), VoteOutcome::Failed),
    ];
    for (quorum, threshold, ballots, expected) in cases {
        let rules = rules(Method::Plurality, quorum, threshold);
        let result = decide(&rules, 6, &ballots, at);
        assert_eq!(
            result.outcome, expected,
            "quorum {quorum}, threshold {threshold}"
        );
        assert_eq!(result.voters as usize, ballots.len());
    }
}
