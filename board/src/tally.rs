//! Tally methods of the voting plane: pure, deterministic counts over ballots.
//!
//! Each ballot is a list of option indices (the options in the order the proposal lists
//! them): one index for plurality, a set for approval, a ranking (best first, possibly
//! partial) for Borda, instant-runoff and Schulze. Nothing here iterates a hash map or
//! touches a float: every count is an integer, every share a comparison of integer
//! products, so every replica computes the same bytes.
//!
//! **Ties are broken by the proposal's option order**, the one documented rule:
//! - plurality, approval, Borda: among options with the highest count, the one listed first
//!   wins;
//! - instant-runoff: each round eliminates the option with the fewest votes; a tie for the
//!   fewest is broken by the earlier rounds (the one with fewer votes in the latest round
//!   where they differ goes), and when they tied in every round the one listed last goes.
//!   The count stops when an option holds more than half of the ballots still in the count,
//!   or only one is left;
//! - Schulze: among the options no other beats along the strongest paths, the one listed
//!   first wins.
//!
//! Borda gives an option ranked at position `i` (from 0) `options − 1 − i` points and an
//! unranked option none. Schulze ranks every ranked option above every unranked one and
//! leaves unranked options tied; a link's strength is its winning votes (`d[i][j]` when
//! `d[i][j] > d[j][i]`, else 0), as in Schulze's own description.
//!
//! Each method also names its winner's **support** over a **base**, the share a
//! threshold is measured on: plurality and approval, the ballots marking the winner over
//! all ballots; Borda, the winner's points over the most points a ballot set can give
//! (`ballots × (options − 1)`); instant-runoff, the winner's votes in the last round over
//! all ballots (an exhausted ballot counts against, never for); Schulze, the fewest
//! ballots ranking the winner above any one other option over all ballots.

use serde::{Deserialize, Serialize};

/// How ballots are counted.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Method {
    /// One option per ballot; the most marks win.
    Plurality,
    /// A set of options per ballot; the most approvals win.
    Approval,
    /// A ranking per ballot; positional points.
    Borda,
    /// A ranking per ballot; the weakest option is eliminated until one has a majority.
    Irv,
    /// A ranking per ballot; Condorcet by Schulze's strongest paths.
    Schulze,
}

crate::codes::stable_codes! {
    Method {
        0 => Plurality,
        1 => Approval,
        2 => Borda,
        3 => Irv,
        4 => Schulze,
    }
}

impl Method {
    /// Every method, in wire order.
    pub const ALL: [Method; 5] = [
        Method::Plurality,
        Method::Approval,
        Method::Borda,
        Method::Irv,
        Method::Schulze,
    ];

    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            Method::Plurality => "plurality",
            Method::Approval => "approval",
            Method::Borda => "borda",
            Method::Irv => "irv",
            Method::Schulze => "schulze",
        }
    }

    /// The method a code names.
    pub fn parse(text: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|method| method.code() == text)
    }

    /// Whether a ballot ranks (its order matters).
    pub fn ranked(self) -> bool {
        matches!(self, Method::Borda | Method::Irv | Method::Schulze)
    }

    /// Check one ballot's option indices against the method and `options`; an approval
    /// set comes back sorted.
    pub fn choice(self, options: usize, mut choice: Vec<u16>) -> Result<Vec<u16>, String> {
        if choice.is_empty() {
            return Err("a ballot chooses at least one option".into());
        }
        if self == Method::Plurality && choice.len() != 1 {
            return Err(format!(
                "a plurality ballot chooses one option, not {}",
                choice.len()
            ));
        }
        if let Some(bad) = choice.iter().find(|i| usize::from(**i) >= options) {
            return Err(format!("option {bad} is not one of the {options} options"));
        }
        let mut sorted = choice.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err("a ballot names each option at most once".into());
        }
        if self == Method::Approval {
            choice = sorted;
        }
        Ok(choice)
    }
}

/// A share `num / den` with `0 <= num <= den`, compared exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fraction {
    /// Numerator.
    pub num: u64,
    /// Denominator (at least 1).
    pub den: u64,
}

impl Fraction {
    /// Parse `2/3`, `0.5`, `1` or `0`, reduced; refused outside 0..=1 or with a
    /// denominator past `limits::VOTE_FRACTION_DEN_MAX`.
    pub fn parse(text: &str) -> Result<Fraction, String> {
        let bad = || format!("{text:?} is not a fraction like 2/3 or 0.5");
        let (num, den) = match text.split_once('/') {
            Some((num, den)) => (
                num.trim().parse::<u64>().map_err(|_| bad())?,
                den.trim().parse::<u64>().map_err(|_| bad())?,
            ),
            None => decimal(text.trim()).ok_or_else(bad)?,
        };
        Fraction::new(num, den)
    }

    /// `num / den`, reduced; refused outside 0..=1 or with a zero or too large denominator.
    pub fn new(num: u64, den: u64) -> Result<Fraction, String> {
        let max = crate::limits::VOTE_FRACTION_DEN_MAX;
        if den == 0 || num > den {
            return Err(format!("{num}/{den} is not a share between 0 and 1"));
        }
        let divisor = gcd(num, den);
        let (num, den) = (num / divisor, den / divisor);
        if den > max {
            return Err(format!("{num}/{den} has a denominator past {max}"));
        }
        Ok(Fraction { num, den })
    }

    /// Whether `part / whole >= self` (false for an empty `whole` unless the share is 0).
    pub fn reached(self, part: u64, whole: u64) -> bool {
        u128::from(part) * u128::from(self.den) >= u128::from(self.num) * u128::from(whole)
    }

    /// Whether `part / whole > self`.
    pub fn passed(self, part: u64, whole: u64) -> bool {
        u128::from(part) * u128::from(self.den) > u128::from(self.num) * u128::from(whole)
    }
}

impl std::fmt::Display for Fraction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}

/// `0.5` → (5, 10): at most 6 decimals.
fn decimal(text: &str) -> Option<(u64, u64)> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 6 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let den = 10u64.pow(u32::try_from(fraction.len()).ok()?);
    let part: u64 = match fraction.is_empty() {
        true => 0,
        false => fraction.parse().ok()?,
    };
    Some((whole.checked_mul(den)?.checked_add(part)?, den))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// The share of support an option needs to pass.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum Threshold {
    /// More than half (`majority`, `simple`).
    Majority,
    /// At least two thirds (`two_thirds`, `2/3`).
    TwoThirds,
    /// At least three quarters (`three_quarters`, `3/4`).
    ThreeQuarters,
    /// At least this share (`0.6`, `3/5`).
    AtLeast(Fraction),
}

crate::codes::stable_codes! {
    Threshold {
        0 => Majority,
        1 => TwoThirds,
        2 => ThreeQuarters,
        3 => AtLeast,
    }
}

impl Threshold {
    /// Parse `majority` (or `simple`), `two_thirds` (or `2/3`), `three_quarters` (or
    /// `3/4`), or any other fraction (at least that share).
    pub fn parse(text: &str) -> Result<Threshold, String> {
        let threshold = match text {
            "majority" | "simple" => Threshold::Majority,
            "two_thirds" => Threshold::TwoThirds,
            "three_quarters" => Threshold::ThreeQuarters,
            other => match Fraction::parse(other)? {
                Fraction { num: 2, den: 3 } => Threshold::TwoThirds,
                Fraction { num: 3, den: 4 } => Threshold::ThreeQuarters,
                Fraction { num: 0, .. } => return Err("a threshold is more than 0".into()),
                fraction => Threshold::AtLeast(fraction),
            },
        };
        Ok(threshold)
    }

    /// A stable code: `majority`, `two_thirds`, `three_quarters` or the fraction.
    pub fn code(&self) -> String {
        match self {
            Threshold::Majority => "majority".into(),
            Threshold::TwoThirds => "two_thirds".into(),
            Threshold::ThreeQuarters => "three_quarters".into(),
            Threshold::AtLeast(fraction) => fraction.to_string(),
        }
    }

    /// Whether `support / base` meets the threshold (never over an empty base).
    pub fn met(&self, support: u64, base: u64) -> bool {
        let half = Fraction { num: 1, den: 2 };
        base > 0
            && match self {
                Threshold::Majority => half.passed(support, base),
                Threshold::TwoThirds => Fraction { num: 2, den: 3 }.reached(support, base),
                Threshold::ThreeQuarters => Fraction { num: 3, den: 4 }.reached(support, base),
                Threshold::AtLeast(fraction) => fraction.reached(support, base),
            }
    }
}

/// What one round of a count shows.
///
/// Stored: every variant has a pinned code (`stable_codes!` after the enum); a new
/// variant takes the next unused code, and a code is never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum RoundKind {
    /// Marks, approvals or points per option.
    Count,
    /// One instant-runoff round: first preferences among the options still in.
    Runoff,
    /// Schulze's pairwise preferences `d[i][j]`: ballots ranking i above j.
    Pairwise,
    /// Schulze's strongest path strengths `p[i][j]`.
    StrongestPaths,
}

crate::codes::stable_codes! {
    RoundKind {
        0 => Count,
        1 => Runoff,
        2 => Pairwise,
        3 => StrongestPaths,
    }
}

impl RoundKind {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            RoundKind::Count => "count",
            RoundKind::Runoff => "runoff",
            RoundKind::Pairwise => "pairwise",
            RoundKind::StrongestPaths => "strongest_paths",
        }
    }

    /// The kind a code names.
    pub fn parse(text: &str) -> Option<RoundKind> {
        [
            RoundKind::Count,
            RoundKind::Runoff,
            RoundKind::Pairwise,
            RoundKind::StrongestPaths,
        ]
        .into_iter()
        .find(|kind| kind.code() == text)
    }
}

/// One round of a count, by option index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    /// What it shows.
    pub kind: RoundKind,
    /// Per option (count and runoff rounds; an eliminated option has 0).
    pub counts: Vec<u64>,
    /// Per pair of options (pairwise and strongest-path rounds), row `i`, column `j`.
    pub matrix: Vec<Vec<u64>>,
    /// The option this runoff round eliminated (none in the last round).
    pub eliminated: Option<u16>,
    /// Ballots this runoff round could not count (every ranked option eliminated).
    pub exhausted: u64,
}

impl Round {
    fn counts(kind: RoundKind, counts: Vec<u64>) -> Round {
        Round {
            kind,
            counts,
            matrix: Vec::new(),
            eliminated: None,
            exhausted: 0,
        }
    }

    fn matrix(kind: RoundKind, matrix: Vec<Vec<u64>>) -> Round {
        Round {
            kind,
            counts: Vec::new(),
            matrix,
            eliminated: None,
            exhausted: 0,
        }
    }
}

/// The result of counting ballots by one method.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// The winning option (none without ballots).
    pub winner: Option<u16>,
    /// The winner's support, measured against `base` (see the module doc).
    pub support: u64,
    /// What the support is a share of.
    pub base: u64,
    /// The counts behind the result.
    pub rounds: Vec<Round>,
}

/// Count `ballots` (already checked with [`Method::choice`]) over `options` options.
pub fn count(method: Method, options: usize, ballots: &[Vec<u16>]) -> Count {
    let total = ballots.len() as u64;
    if ballots.is_empty() {
        return Count {
            winner: None,
            support: 0,
            base: 0,
            rounds: Vec::new(),
        };
    }
    match method {
        Method::Plurality | Method::Approval => {
            let mut counts = vec![0u64; options];
            for index in ballots.iter().flatten() {
                counts[usize::from(*index)] += 1;
            }
            let winner = first_highest(&counts);
            single(winner, counts[winner], total, counts)
        }
        Method::Borda => {
            let mut points = vec![0u64; options];
            for ballot in ballots {
                for (position, index) in ballot.iter().enumerate() {
                    points[usize::from(*index)] += (options - 1 - position) as u64;
                }
            }
            let winner = first_highest(&points);
            let base = total * (options as u64).saturating_sub(1);
            single(winner, points[winner], base, points)
        }
        Method::Irv => irv(options, ballots),
        Method::Schulze => schulze(options, ballots),
    }
}

fn single(winner: usize, support: u64, base: u64, counts: Vec<u64>) -> Count {
    Count {
        winner: Some(index(winner)),
        support,
        base,
        rounds: vec![Round::counts(RoundKind::Count, counts)],
    }
}

fn index(option: usize) -> u16 {
    u16::try_from(option).expect("options fit u16")
}

/// The first index holding the highest value.
fn first_highest(values: &[u64]) -> usize {
    let mut best = 0;
    for (i, value) in values.iter().enumerate() {
        if *value > values[best] {
            best = i;
        }
    }
    best
}

/// Instant-runoff: eliminate the weakest option until one holds more than half of the
/// ballots still counted, or only one is left.
fn irv(options: usize, ballots: &[Vec<u16>]) -> Count {
    let mut live = vec![true; options];
    let mut rounds: Vec<Round> = Vec::new();
    loop {
        let mut counts = vec![0u64; options];
        let mut exhausted = 0u64;
        for ballot in ballots {
            match ballot.iter().find(|i| live[usize::from(**i)]) {
                Some(top) => counts[usize::from(*top)] += 1,
                None => exhausted += 1,
            }
        }
        let counted = ballots.len() as u64 - exhausted;
        let leader = (0..options)
            .filter(|i| live[*i])
            .fold(None, |best: Option<usize>, i| match best {
                Some(b) if counts[b] >= counts[i] => Some(b),
                _ => Some(i),
            })
            .expect("an option is still in the count");
        let remaining = live.iter().filter(|l| **l).count();
        let mut round = Round::counts(RoundKind::Runoff, counts.clone());
        round.exhausted = exhausted;
        if counts[leader] * 2 > counted || remaining == 1 {
            rounds.push(round);
            return Count {
                winner: Some(index(leader)),
                support: counts[leader],
                base: ballots.len() as u64,
                rounds,
            };
        }
        let out = weakest(&live, &counts, &rounds);
        live[out] = false;
        round.eliminated = Some(index(out));
        rounds.push(round);
    }
}

/// The option to eliminate: the fewest votes now; a tie goes back through the earlier
/// rounds (the fewest there goes); still tied, the one listed last.
fn weakest(live: &[bool], counts: &[u64], earlier: &[Round]) -> usize {
    let low = (0..counts.len())
        .filter(|i| live[*i])
        .map(|i| counts[i])
        .min()
        .expect("an option is still in the count");
    let mut tied: Vec<usize> = (0..counts.len())
        .filter(|i| live[*i] && counts[*i] == low)
        .collect();
    for round in earlier.iter().rev() {
        if tied.len() == 1 {
            break;
        }
        let fewest = tied.iter().map(|i| round.counts[*i]).min().unwrap_or(0);
        tied.retain(|i| round.counts[*i] == fewest);
    }
    *tied.last().expect("a tied option remains")
}

/// Condorcet by Schulze's method: pairwise preferences, strongest paths (a widest-path
/// Floyd–Warshall), then the first option no other beats.
fn schulze(options: usize, ballots: &[Vec<u16>]) -> Count {
    let d = pairwise(options, ballots);
    let mut p = vec![vec![0u64; options]; options];
    for i in 0..options {
        for j in 0..options {
            if i != j && d[i][j] > d[j][i] {
                p[i][j] = d[i][j];
            }
        }
    }
    for k in 0..options {
        for i in (0..options).filter(|i| *i != k) {
            for j in (0..options).filter(|j| *j != i && *j != k) {
                p[i][j] = p[i][j].max(p[i][k].min(p[k][j]));
            }
        }
    }
    let winner = (0..options)
        .find(|i| (0..options).all(|j| j == *i || p[*i][j] >= p[j][*i]))
        .expect("the beat-path relation has a maximum");
    let support = (0..options)
        .filter(|j| *j != winner)
        .map(|j| d[winner][j])
        .min()
        .unwrap_or(0);
    Count {
        winner: Some(index(winner)),
        support,
        base: ballots.len() as u64,
        rounds: vec![
            Round::matrix(RoundKind::Pairwise, d),
            Round::matrix(RoundKind::StrongestPaths, p),
        ],
    }
}

/// `d[i][j]`: ballots ranking i above j (a ranked option is above every unranked one).
fn pairwise(options: usize, ballots: &[Vec<u16>]) -> Vec<Vec<u64>> {
    let mut d = vec![vec![0u64; options]; options];
    let mut rank = vec![usize::MAX; options];
    for ballot in ballots {
        rank.iter_mut().for_each(|r| *r = usize::MAX);
        for (position, option) in ballot.iter().enumerate() {
            rank[usize::from(*option)] = position;
        }
        for i in 0..options {
            for j in 0..options {
                if rank[i] < rank[j] {
                    d[i][j] += 1;
                }
            }
        }
    }
    d
}
