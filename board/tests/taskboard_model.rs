//! Goal: teams and task boards agree with a naive model on random logs, and the board's own
//! answers show the claim invariants. Method: proptest draws sequences of team and board
//! commands over two teams (one the child of the other), four agents (one an outsider until
//! it joins) and a few task ids, with increasing stamps (batches share a time; time
//! sometimes jumps past claim windows, spill windows and the done retention). Each outcome
//! and every read view must equal the model's. From the board's answers alone: deliveries
//! of a task are handed out in order, so no delivery has two claimants; a completion always
//! presents the latest claim's fence before its deadline; and until a team is dissolved the
//! boards' counts add up to the tasks posted. Replaying the log on a fresh store must give
//! byte-identical state. proptest prints the shrunk failing log and saves its seed under
//! `proptest-regressions`.

use std::collections::BTreeMap;

use proptest::prelude::*;
use whip_board::limits::{
    FENCES_PER_COMMAND, MAILBOX_MESSAGES_MAX, TASK_DONE_RETAIN_MS, TASK_FAILURES_MAX,
};
use whip_board::{
    BoardRefusal, BoardSettings, BoardStatsView, Claimed, Command, Completion, Failure,
    MailboxMessage, MemTxn, MessageKind, Outcome, Query, QueryResult, Request, Stamp, TaskState,
    TaskView, TeamView, Tier, apply, query,
};

const TEAMS: [&str; 2] = ["t1", "t1/sub"];
const AGENTS: [&str; 4] = ["a", "b", "c", "x"];
/// Who acts: mostly `a` (often the creator), sometimes the others.
const CALLERS: [&str; 8] = ["a", "a", "a", "a", "a", "b", "c", "x"];

// ----- the naive model -----

#[derive(Clone, Debug)]
struct MTeam {
    supervisor: String,
    members: Vec<String>,
    ancestors: Vec<String>,
    parent: Option<String>,
    settings: BoardSettings,
    last_seq: u64,
    done: u64,
}

#[derive(Clone, Debug)]
struct MTask {
    view: TaskView,
    settings: BoardSettings,
    spill_at: Option<u64>,
    spill_seq: u64,
    prune_at: u64,
}

#[derive(Debug, Default)]
struct Model {
    teams: BTreeMap<String, MTeam>,
    /// Every stored task by (origin team, sequence), at whatever tier.
    tasks: BTreeMap<(String, u64), MTask>,
    cell_seq: u64,
    cell_done: u64,
    /// (team, agent) → (messages sent, messages kept).
    mail: BTreeMap<(String, String), (u64, Vec<MailboxMessage>)>,
}

fn not_member(agent: &str, team: &Option<String>) -> Outcome {
    refused(BoardRefusal::NotMember {
        agent: agent.to_string(),
        team: team.clone().unwrap_or_default(),
    })
}

fn refused(reason: BoardRefusal) -> Outcome {
    Outcome::BoardRefused { reason }
}

/// The origin and sequence of `{team}-{seq}`.
fn parse(id: &str) -> Option<(String, u64)> {
    let at = id.rfind('-')?;
    let (team, seq) = (&id[..at], &id[at + 1..]);
    let canonical = !seq.is_empty()
        && seq.bytes().all(|b| b.is_ascii_digit())
        && (seq == "0" || !seq.starts_with('0'));
    if !canonical || team.is_empty() {
        return None;
    }
    Some((team.to_string(), seq.parse().ok()?))
}

impl Model {
    fn member(&self, team: &str, caller: &str) -> Result<&MTeam, Outcome> {
        let Some(t) = self.teams.get(team) else {
            return Err(refused(BoardRefusal::UnknownTeam { team: team.into() }));
        };
        if !t.members.iter().chain(&t.ancestors).any(|m| m == caller) {
            return Err(not_member(caller, &Some(team.to_string())));
        }
        Ok(t)
    }

    /// Whether `caller` is in the lineage of team `origin` (a member of it or of a team
    /// above it): only they reach its spilled tasks.
    fn in_lineage(&self, origin: &str, caller: &str) -> bool {
        self.teams
            .get(origin)
            .is_some_and(|t| t.members.iter().chain(&t.ancestors).any(|m| m == caller))
    }

    /// A task reached through `team` by `caller`: its own local task, or a cell-tier task
    /// of `caller`'s lineage.
    fn locate(&self, team: &str, id: &str, caller: &str) -> Option<(String, u64)> {
        let key = parse(id)?;
        let task = self.tasks.get(&key)?;
        let cell = task.view.tier == Tier::Cell && self.in_lineage(&key.0, caller);
        (cell || (task.view.tier == Tier::Local && key.0 == team)).then_some(key)
    }

    fn join(&mut self, team: &str, caller: &str, agent: &str) -> Outcome {
        if let Err(refusal) = self.member(team, caller) {
            return refusal;
        }
        let t = self.teams.get_mut(team).expect("member");
        // Joins go through the supervisor or an ancestor team's member.
        if t.supervisor != caller && !t.ancestors.iter().any(|a| a == caller) {
            return refused(BoardRefusal::NotSupervisor {
                agent: caller.to_string(),
                supervisor: t.supervisor.clone(),
            });
        }
        if !t.members.iter().any(|m| m == agent) {
            t.members.push(agent.to_string());
        }
        Outcome::TeamJoined {
            team: team.to_string(),
            agent: agent.to_string(),
        }
    }

    fn apply(&mut self, stamp: Stamp, command: &Command) -> Outcome {
        let now = stamp.time_ms;
        match command {
            Command::TeamCreate {
                team,
                caller,
                parent,
                ancestors,
                settings,
            } => match self.teams.get(team) {
                // A child team is made by a member of its parent or an ancestor.
                _ if parent.is_some() && !ancestors.contains(caller) => not_member(caller, parent),
                Some(t) if &t.supervisor == caller => Outcome::TeamCreated { team: team.clone() },
                Some(_) => refused(BoardRefusal::TeamExists { team: team.clone() }),
                None => {
                    let record = MTeam {
                        supervisor: caller.clone(),
                        members: vec![caller.clone()],
                        ancestors: ancestors.clone(),
                        parent: parent.clone(),
                        settings: *settings,
                        last_seq: 0,
                        done: 0,
                    };
                    self.teams.insert(team.clone(), record);
                    Outcome::TeamCreated { team: team.clone() }
                }
            },
            Command::TeamJoin {
                team,
                caller,
                agent,
            } => self.join(team, caller, agent),
            Command::TeamDissolve { team, caller } => self.dissolve(team, caller),
            Command::BoardPost { team, caller, body } => self.post(now, team, caller, body),
            Command::BoardClaim {
                team,
                caller,
                worker,
            } => self.claim(stamp, team, caller, worker),
            Command::BoardClaimTask {
                team,
                caller,
                worker,
                task_id,
                claim_ms,
            } => self.claim_task(stamp, (team, caller, worker), task_id, *claim_ms),
            Command::BoardRedrive {
                team,
                caller,
                task_id,
            } => self.redrive(now, team, caller, task_id),
            Command::BoardClaimMany {
                team,
                caller,
                worker,
                completes,
                max,
                claim_ms,
            } => self.claim_many(stamp, (team, caller, worker), completes, (*max, *claim_ms)),
            Command::Tick => Outcome::Ticked {
                processed: self.tick(now),
            },
            other => self.presented(now, other),
        }
    }

    fn dissolve(&mut self, team: &str, caller: &str) -> Outcome {
        let Some(t) = self.teams.get(team) else {
            return refused(BoardRefusal::UnknownTeam { team: team.into() });
        };
        if t.supervisor != caller {
            return refused(BoardRefusal::NotSupervisor {
                agent: caller.into(),
                supervisor: t.supervisor.clone(),
            });
        }
        self.teams.remove(team);
        let mut removed = 1u32;
        self.tasks.retain(|(origin, _), task| {
            let keep = origin != team;
            if !keep {
                removed += 1 + task.view.delivery_count;
            }
            keep
        });
        self.mail.retain(|(owner, _), (_, kept)| {
            let keep = owner != team;
            if !keep {
                removed += 1 + kept.len() as u32;
            }
            keep
        });
        Outcome::TeamDissolved {
            removed,
            done: true,
        }
    }

    fn post(&mut self, now: u64, team: &str, caller: &str, body: &[u8]) -> Outcome {
        let settings = match self.member(team, caller) {
            Ok(t) => t.settings,
            Err(refusal) => return refusal,
        };
        if body.len() > settings.task_bytes_max as usize {
            let reason = format!(
                "body is {} bytes, limit is {}",
                body.len(),
                settings.task_bytes_max
            );
            return Outcome::Invalid { reason };
        }
        let t = self.teams.get_mut(team).expect("member");
        t.last_seq += 1;
        let seq = t.last_seq;
        let id = format!("{team}-{seq}");
        let view = TaskView {
            id: id.clone(),
            team: team.into(),
            tier: Tier::Local,
            state: TaskState::Ready,
            body: body.to_vec(),
            delivery_count: 0,
            worker: None,
            fence: 0,
            deadline_ms: 0,
            posted_ms: now,
            failures: Vec::new(),
            result: Vec::new(),
            spill_after_ms: settings.spill_after_ms,
        };
        let spill_at = (settings.spill_after_ms > 0).then(|| now + settings.spill_after_ms);
        let task = MTask {
            view,
            settings,
            spill_at,
            spill_seq: 0,
            prune_at: 0,
        };
        self.tasks.insert((team.into(), seq), task);
        Outcome::TaskPosted {
            task_id: id,
            tier: Tier::Local,
        }
    }

    fn claim(&mut self, stamp: Stamp, team: &str, caller: &str, worker: &str) -> Outcome {
        let at = (stamp.fence(), stamp.time_ms, 0);
        self.claim_at(at, (team, caller, worker))
    }

    /// A prefetching claim: every completion checked first (all or none), then up to
    /// `max` claims, the `k`-th under the command's `k`-th fence.
    fn claim_many(
        &mut self,
        stamp: Stamp,
        who: (&str, &str, &str),
        completes: &[Completion],
        (max, claim_ms): (u32, u64),
    ) -> Outcome {
        let (team, caller, now) = (who.0, who.1, stamp.time_ms);
        if let Err(refusal) = self.member(team, caller) {
            return refusal;
        }
        let mut keys = Vec::new();
        for c in completes {
            let key = match self.held(now, team, caller, &c.task_id, c.fence) {
                Ok(key) => key,
                Err(refusal) => return refusal,
            };
            let limit = self.tasks[&key].settings.task_bytes_max as usize;
            if c.result.len() > limit {
                let reason = format!("result is {} bytes, limit is {limit}", c.result.len());
                return Outcome::Invalid { reason };
            }
            keys.push(key);
        }
        let mut completed = Vec::new();
        for (key, c) in keys.iter().zip(completes) {
            self.complete(now, key, &c.result);
            completed.push(c.task_id.clone());
        }
        let mut claims = Vec::new();
        for k in 0..max {
            match self.claim_at((stamp.nth_fence(k), now, claim_ms), who) {
                Outcome::TaskClaimed {
                    task,
                    fence,
                    deadline_ms,
                    tier,
                } => claims.push(Claimed {
                    task: *task,
                    fence,
                    deadline_ms,
                    tier,
                }),
                _ => break,
            }
        }
        Outcome::TasksClaimed { completed, claims }
    }

    /// The oldest ready task (local, then the cell tier) claimed under `fence` at `now`
    /// for `window_ms` (0 = the team's `reclaim_ms`).
    fn claim_at(&mut self, at: (u64, u64, u64), who: (&str, &str, &str)) -> Outcome {
        let ((fence, now, window_ms), (team, caller, worker)) = (at, who);
        if let Err(refusal) = self.member(team, caller) {
            return refusal;
        }
        let ready = |t: &&MTask| t.view.state == TaskState::Ready;
        let local = self
            .tasks
            .iter()
            .filter(|(k, t)| k.0 == team && t.view.tier == Tier::Local)
            .filter(|(_, t)| ready(t))
            .map(|(k, _)| k.clone())
            .next();
        let cell = || {
            self.tasks
                .iter()
                .filter(|(_, t)| t.view.tier == Tier::Cell && ready(t))
                .filter(|(k, _)| self.in_lineage(&k.0, caller))
                .min_by_key(|(_, t)| t.spill_seq)
                .map(|(k, _)| k.clone())
        };
        let Some(key) = local.or_else(cell) else {
            return Outcome::BoardEmpty;
        };
        let task = self.tasks.get_mut(&key).expect("picked");
        task.spill_at = None;
        task.view.delivery_count += 1;
        task.view.state = TaskState::Claimed;
        task.view.worker = Some(worker.into());
        task.view.fence = fence;
        task.view.deadline_ms = match window_ms {
            0 => now + task.settings.reclaim_ms,
            ms => now + ms,
        };
        Outcome::TaskClaimed {
            task: Box::new(task.view.clone()),
            fence: task.view.fence,
            deadline_ms: task.view.deadline_ms,
            tier: task.view.tier,
        }
    }

    /// A named claim: a ready task, a lapsed one (its lapse recorded first), or the
    /// worker's own live claim again (same fence, the window pushed out).
    fn claim_task(
        &mut self,
        stamp: Stamp,
        who: (&str, &str, &str),
        id: &str,
        claim_ms: u64,
    ) -> Outcome {
        let (team, caller, worker) = who;
        let now = stamp.time_ms;
        if let Err(refusal) = self.member(team, caller) {
            return refusal;
        }
        let Some(key) = self.locate(team, id, caller) else {
            return refused(BoardRefusal::UnknownTask { task_id: id.into() });
        };
        let (state, deadline) = {
            let view = &self.tasks[&key].view;
            (view.state, view.deadline_ms)
        };
        if state == TaskState::Claimed && deadline <= now {
            let error = format!("reclaim window passed at {deadline}");
            self.release_or_bury(now, &key, error);
        }
        let task = self.tasks.get_mut(&key).expect("located");
        let window = match claim_ms {
            0 => task.settings.reclaim_ms,
            ms => ms,
        };
        let view = &mut task.view;
        match view.state {
            TaskState::Ready => {
                task.spill_at = None;
                view.delivery_count += 1;
                view.state = TaskState::Claimed;
                view.worker = Some(worker.into());
                view.fence = stamp.fence();
                view.deadline_ms = now + window;
            }
            TaskState::Claimed if view.worker.as_deref() == Some(worker) => {
                view.deadline_ms = view.deadline_ms.max(now + window);
            }
            TaskState::Claimed => {
                return refused(BoardRefusal::Taken {
                    task_id: view.id.clone(),
                    worker: view.worker.clone().unwrap_or_default(),
                });
            }
            state => {
                return refused(BoardRefusal::NotReady {
                    task_id: view.id.clone(),
                    state,
                });
            }
        }
        Outcome::TaskClaimed {
            task: Box::new(view.clone()),
            fence: view.fence,
            deadline_ms: view.deadline_ms,
            tier: view.tier,
        }
    }

    /// The live claim presented through `team`, else the refusal.
    fn held(
        &self,
        now: u64,
        team: &str,
        caller: &str,
        id: &str,
        fence: u64,
    ) -> Result<(String, u64), Outcome> {
        self.member(team, caller)?;
        let Some(key) = self.locate(team, id, caller) else {
            return Err(refused(BoardRefusal::UnknownTask { task_id: id.into() }));
        };
        let view = &self.tasks[&key].view;
        if view.state != TaskState::Claimed {
            return Err(refused(BoardRefusal::NotClaimed {
                task_id: id.into(),
                state: view.state,
            }));
        }
        if fence != view.fence {
            return Err(refused(BoardRefusal::StaleFence {
                presented: fence,
                current: view.fence,
            }));
        }
        if view.deadline_ms <= now {
            return Err(refused(BoardRefusal::ClaimExpired {
                deadline_ms: view.deadline_ms,
                now_ms: now,
            }));
        }
        Ok(key)
    }

    /// Complete, fail and extend.
    fn presented(&mut self, now: u64, command: &Command) -> Outcome {
        let (team, caller, id, fence) = match command {
            Command::BoardComplete {
                team,
                caller,
                task_id,
                fence,
                ..
            }
            | Command::BoardFail {
                team,
                caller,
                task_id,
                fence,
                ..
            }
            | Command::BoardExtend {
                team,
                caller,
                task_id,
                fence,
                ..
            }
            | Command::BoardRelease {
                team,
                caller,
                task_id,
                fence,
            } => (team, caller, task_id, *fence),
            other => unreachable!("the model does not generate {other:?}"),
        };
        let key = match self.held(now, team, caller, id, fence) {
            Ok(key) => key,
            Err(refusal) => return refusal,
        };
        match command {
            Command::BoardComplete { result, .. } => self.complete(now, &key, result),
            Command::BoardFail { error, .. } => self.release_or_bury(now, &key, error.clone()),
            Command::BoardRelease { .. } => {
                let view = &mut self.tasks.get_mut(&key).expect("held").view;
                view.state = TaskState::Ready;
                view.worker = None;
                Outcome::TaskReleased {
                    task_id: view.id.clone(),
                    delivery_count: view.delivery_count,
                }
            }
            Command::BoardExtend { extend_ms, .. } => {
                let view = &mut self.tasks.get_mut(&key).expect("held").view;
                view.deadline_ms = view.deadline_ms.max(now + extend_ms);
                Outcome::TaskExtended {
                    deadline_ms: view.deadline_ms,
                }
            }
            other => unreachable!("{other:?} does not present a claim"),
        }
    }

    fn complete(&mut self, now: u64, key: &(String, u64), result: &[u8]) -> Outcome {
        let task = self.tasks.get_mut(key).expect("held");
        let limit = task.settings.task_bytes_max;
        if result.len() > limit as usize {
            let reason = format!("result is {} bytes, limit is {limit}", result.len());
            return Outcome::Invalid { reason };
        }
        task.view.state = TaskState::Done;
        task.view.result = result.to_vec();
        task.prune_at = now + TASK_DONE_RETAIN_MS;
        match task.view.tier {
            Tier::Local => self.teams.get_mut(&key.0).expect("origin").done += 1,
            _ => self.cell_done += 1,
        }
        Outcome::TaskCompleted {
            task_id: task.view.id.clone(),
        }
    }

    fn release_or_bury(&mut self, now: u64, key: &(String, u64), error: String) -> Outcome {
        let task = self.tasks.get_mut(key).expect("claimed");
        let view = &mut task.view;
        view.failures.push(Failure {
            delivery: view.delivery_count,
            worker: view.worker.take().unwrap_or_default(),
            error,
            at_ms: now,
        });
        if view.failures.len() > TASK_FAILURES_MAX {
            view.failures.remove(0);
        }
        let (task_id, delivery_count) = (view.id.clone(), view.delivery_count);
        if delivery_count >= task.settings.delivery_limit {
            view.state = TaskState::Dead;
            let last = view
                .failures
                .last()
                .map_or(String::new(), |f| f.error.clone());
            self.notify(now, &key.0, &task_id, delivery_count, &last);
            return Outcome::TaskDeadLettered {
                task_id,
                delivery_count,
            };
        }
        view.state = TaskState::Ready;
        Outcome::TaskReleased {
            task_id,
            delivery_count,
        }
    }

    fn notify(&mut self, now: u64, team: &str, task_id: &str, delivery_count: u32, last: &str) {
        let Some(t) = self.teams.get(team) else {
            return;
        };
        let mailbox = self
            .mail
            .entry((team.into(), t.supervisor.clone()))
            .or_default();
        mailbox.0 += 1;
        mailbox.1.push(MailboxMessage {
            seq: mailbox.0,
            from: format!("board/{team}"),
            kind: MessageKind::DeadLetter {
                task_id: task_id.into(),
                delivery_count,
            },
            body: format!("task {task_id} was dead-lettered at delivery {delivery_count}: {last}")
                .into_bytes(),
            at_ms: now,
        });
        if mailbox.1.len() as u64 > MAILBOX_MESSAGES_MAX {
            mailbox.1.remove(0);
        }
    }

    fn redrive(&mut self, now: u64, team: &str, caller: &str, id: &str) -> Outcome {
        if let Err(refusal) = self.member(team, caller) {
            return refusal;
        }
        let own = parse(id).is_some_and(|(origin, _)| origin == team);
        let Some(key) = self.locate(team, id, caller).filter(|_| own) else {
            return refused(BoardRefusal::UnknownTask { task_id: id.into() });
        };
        let task = self.tasks.get_mut(&key).expect("located");
        if task.view.state != TaskState::Dead {
            return refused(BoardRefusal::NotDead {
                task_id: id.into(),
                state: task.view.state,
            });
        }
        task.view.delivery_count = 0;
        task.view.state = TaskState::Ready;
        let spills = task.view.tier == Tier::Local && task.settings.spill_after_ms > 0;
        task.spill_at = spills.then(|| now + task.settings.spill_after_ms);
        Outcome::TaskRedriven { task_id: id.into() }
    }

    /// Due items in deadline-index order: deadline, kind (claim 6, spill 7, done 8), team,
    /// sequence, tier.
    fn tick(&mut self, now: u64) -> u32 {
        let mut due = Vec::new();
        for ((team, seq), task) in &self.tasks {
            let (view, tier) = (&task.view, task.view.tier as u8);
            if view.state == TaskState::Claimed && view.deadline_ms <= now {
                due.push((view.deadline_ms, 6u8, team.clone(), *seq, tier));
            }
            if let Some(at) = task.spill_at.filter(|at| *at <= now) {
                due.push((at, 7, team.clone(), *seq, tier));
            }
            if view.state == TaskState::Done && task.prune_at <= now {
                due.push((task.prune_at, 8, team.clone(), *seq, tier));
            }
        }
        due.sort();
        let mut processed = 0;
        for (at, kind, team, seq, _) in due {
            let key = (team, seq);
            processed += match kind {
                6 => {
                    let error = format!("reclaim window passed at {at}");
                    self.release_or_bury(now, &key, error);
                    1
                }
                7 => {
                    self.cell_seq += 1;
                    let task = self.tasks.get_mut(&key).expect("due");
                    task.view.tier = Tier::Cell;
                    task.spill_seq = self.cell_seq;
                    task.spill_at = None;
                    1
                }
                _ => 1 + self.tasks.remove(&key).expect("due").view.delivery_count,
            };
        }
        processed
    }

    fn next_deadline(&self) -> Option<u64> {
        let deadlines = self.tasks.values().flat_map(|task| {
            let claim = (task.view.state == TaskState::Claimed).then_some(task.view.deadline_ms);
            let done = (task.view.state == TaskState::Done).then_some(task.prune_at);
            [claim, task.spill_at, done].into_iter().flatten()
        });
        deadlines.min()
    }

    fn stats(&self, team: &str) -> Option<BoardStatsView> {
        let t = self.teams.get(team)?;
        let count = |tier: Tier, state: TaskState, origin: Option<&str>| {
            let matching = self.tasks.iter().filter(|((o, _), task)| {
                origin.is_none_or(|origin| o == origin)
                    && task.view.tier == tier
                    && task.view.state == state
            });
            matching.count() as u64
        };
        Some(BoardStatsView {
            ready: count(Tier::Local, TaskState::Ready, Some(team)),
            claimed: count(Tier::Local, TaskState::Claimed, Some(team)),
            done: t.done,
            dead: count(Tier::Local, TaskState::Dead, Some(team)),
            tier: Tier::Local,
            cell_ready: count(Tier::Cell, TaskState::Ready, None),
            cell_claimed: count(Tier::Cell, TaskState::Claimed, None),
            cell_done: self.cell_done,
            cell_dead: count(Tier::Cell, TaskState::Dead, None),
        })
    }

    fn team_view(&self, team: &str) -> Option<TeamView> {
        self.teams.get(team).map(|t| TeamView {
            team: team.into(),
            supervisor: t.supervisor.clone(),
            members: t.members.clone(),
            parent: t.parent.clone(),
            settings: t.settings,
        })
    }

    /// Tasks posted by `team` at `tier` in sequence order, as views.
    fn views(&self, team: &str, tier: Tier, state: Option<TaskState>) -> Vec<TaskView> {
        self.tasks
            .iter()
            .filter(|((origin, _), task)| origin == team && task.view.tier == tier)
            .filter(|(_, task)| state.is_none_or(|s| task.view.state == s))
            .map(|(_, task)| task.view.clone())
            .collect()
    }

    fn cell_ready(&self) -> Vec<TaskView> {
        let mut ready: Vec<&MTask> = self
            .tasks
            .values()
            .filter(|t| t.view.tier == Tier::Cell && t.view.state == TaskState::Ready)
            .collect();
        ready.sort_by_key(|t| t.spill_seq);
        ready.into_iter().map(|t| t.view.clone()).collect()
    }
}

// ----- generators -----

fn name(list: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop::sample::select(list).prop_map(String::from)
}

fn settings() -> impl Strategy<Value = BoardSettings> {
    let reclaim = prop::sample::select(vec![100u64, 60_000]);
    let spill = prop::sample::select(vec![0u64, 100, 100]);
    let bytes = prop::sample::select(vec![4u32, 64]);
    (reclaim, 1..=3u32, spill, bytes).prop_map(
        |(reclaim_ms, delivery_limit, spill_after_ms, task_bytes_max)| BoardSettings {
            reclaim_ms,
            delivery_limit,
            spill_after_ms,
            task_bytes_max,
        },
    )
}

fn create() -> impl Strategy<Value = Command> {
    let ancestors = prop::sample::select(vec![
        vec![],
        vec!["a".to_string()],
        vec!["b".into()],
        vec!["a".into(), "b".into()],
        vec!["a".into(), "b".into()],
        vec!["a".into(), "b".into()],
    ]);
    let creator = name(&["a", "a", "a", "b"]);
    (0..2usize, creator, ancestors, settings()).prop_map(|(at, caller, ancestors, settings)| {
        Command::TeamCreate {
            team: TEAMS[at].into(),
            caller,
            parent: (at == 1).then(|| TEAMS[0].to_string()),
            ancestors: if at == 1 { ancestors } else { Vec::new() },
            settings,
        }
    })
}

/// Claim windows of named claims: none (the board's), short, long.
fn claim_windows() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![0u64, 50, 5_000])
}

fn command() -> impl Strategy<Value = Command> {
    let team = name(&TEAMS);
    let agent = name(&CALLERS);
    // Sequence 0 stands for "a task the model holds in the state that matters" (see
    // `resolve`).
    let seq = prop::sample::select(vec![0u64, 0, 0, 1, 2, 3]);
    let task = (0..2usize, seq).prop_map(|(at, n)| format!("{}-{n}", TEAMS[at]));
    // 0 stands for "the task's current fence in the model" (see `resolve`).
    let fence = prop::sample::select(vec![0u64, 0, 0, 1]);
    let bytes = prop::collection::vec(Just(b'x'), 0..8);
    let claimed = (team.clone(), agent.clone(), task.clone(), fence);
    prop_oneof![
        5 => create(),
        3 => (team.clone(), agent.clone(), name(&AGENTS)).prop_map(|(team, caller, agent)| {
            Command::TeamJoin { team, caller, agent }
        }),
        6 => (team.clone(), agent.clone(), bytes.clone())
            .prop_map(|(team, caller, body)| Command::BoardPost { team, caller, body }),
        6 => (team.clone(), agent.clone(), agent.clone()).prop_map(|(team, caller, worker)| {
            Command::BoardClaim { team, caller, worker }
        }),
        8 => (claimed.clone(), bytes).prop_map(|((team, caller, task_id, fence), result)| {
            Command::BoardComplete { team, caller, task_id, fence, result }
        }),
        6 => (claimed.clone(), name(&["boom", "oom"])).prop_map(
            |((team, caller, task_id, fence), error)| Command::BoardFail {
                team, caller, task_id, fence, error,
            }
        ),
        2 => (claimed.clone(), prop::sample::select(vec![1u64, 100, 1_000])).prop_map(
            |((team, caller, task_id, fence), extend_ms)| Command::BoardExtend {
                team, caller, task_id, fence, extend_ms,
            }
        ),
        2 => (team.clone(), agent.clone(), task.clone()).prop_map(|(team, caller, task_id)| {
            Command::BoardRedrive { team, caller, task_id }
        }),
        3 => (claimed.clone()).prop_map(|(team, caller, task_id, fence)| {
            Command::BoardRelease { team, caller, task_id, fence }
        }),
        4 => (team.clone(), agent.clone(), agent.clone(), task, claim_windows())
            .prop_map(|(team, caller, worker, task_id, claim_ms)| {
                Command::BoardClaimTask { team, caller, worker, task_id, claim_ms }
            }),
        5 => Just(Command::Tick),
        1 => (team.clone(), agent.clone()).prop_map(|(team, caller)| {
            Command::TeamDissolve { team, caller }
        }),
        2 => claim_many(team, agent),
    ]
}

/// A prefetching claim: up to three completions (fence 0 = the held claim's fence, see
/// `resolve`; 1 = a stale one), one to four claims.
fn claim_many(
    team: impl Strategy<Value = String> + Clone,
    agent: impl Strategy<Value = String> + Clone,
) -> impl Strategy<Value = Command> {
    let fence = prop::sample::select(vec![0u64, 0, 0, 0, 1]);
    let done = (fence, prop::collection::vec(Just(b'r'), 0..4));
    let completes = prop::collection::vec(done, 0..3);
    let shape = (1u32..5, claim_windows());
    (team, agent.clone(), agent, completes, shape).prop_map(
        |(team, caller, worker, completes, (max, claim_ms))| {
            let completes = completes
                .into_iter()
                .map(|(fence, result)| Completion {
                    task_id: String::new(),
                    fence,
                    result,
                })
                .collect();
            Command::BoardClaimMany {
                team,
                caller,
                worker,
                completes,
                max,
                claim_ms,
            }
        },
    )
}

#[derive(Clone, Debug)]
struct Step {
    same_entry: bool,
    advance_ms: u64,
    command: Command,
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop::sample::select(vec![
        0u64, 0, 1, 1, 10, 10, 99, 100, 100, 500, 5_000, 59_999, 60_000, 700_000,
    ]);
    (prop::bool::weighted(0.2), advance, command()).prop_map(|(same_entry, advance_ms, command)| {
        Step {
            same_entry,
            advance_ms,
            command,
        }
    })
}

/// The step's command: a generated task of sequence 0 becomes a claimed task (a dead one
/// for a redrive) of the model, if any, and a generated fence of 0 becomes the task's
/// current fence in the model, so that ids and fences match often enough to matter. When
/// both are generated so, the claim is presented through a team that reaches the task by
/// a member of it.
fn resolve(step: &Step, model: &Model) -> Command {
    let mut command = resolve_many(step.command.clone(), model);
    if let Command::BoardComplete {
        team,
        caller,
        task_id,
        fence: 0,
        ..
    }
    | Command::BoardFail {
        team,
        caller,
        task_id,
        fence: 0,
        ..
    }
    | Command::BoardExtend {
        team,
        caller,
        task_id,
        fence: 0,
        ..
    }
    | Command::BoardRelease {
        team,
        caller,
        task_id,
        fence: 0,
    } = &mut command
        && task_id.ends_with("-0")
        && let Some(task) = model
            .tasks
            .values()
            .filter(|t| t.view.state == TaskState::Claimed)
            .max_by_key(|t| t.view.deadline_ms)
    {
        if task.view.tier == Tier::Local {
            *team = task.view.team.clone();
        }
        if let Some(t) = model.teams.get(team.as_str()) {
            *caller = t.supervisor.clone();
        }
        *task_id = task.view.id.clone();
    }
    let pick = |state: TaskState, id: &mut String| {
        let origin = parse(id).map(|(origin, _)| origin).unwrap_or_default();
        let found = model
            .tasks
            .values()
            .filter(|t| t.view.state == state)
            .min_by_key(|t| (t.view.team != origin, t.view.id.clone()));
        if let Some(task) = found.filter(|_| id.ends_with("-0")) {
            *id = task.view.id.clone();
        }
    };
    match &mut command {
        Command::BoardComplete { task_id, .. }
        | Command::BoardFail { task_id, .. }
        | Command::BoardRelease { task_id, .. }
        | Command::BoardExtend { task_id, .. } => pick(TaskState::Claimed, task_id),
        Command::BoardRedrive { task_id, .. } => pick(TaskState::Dead, task_id),
        Command::BoardClaimTask { task_id, .. } => pick(TaskState::Ready, task_id),
        _ => {}
    }
    if let Command::BoardComplete { task_id, fence, .. }
    | Command::BoardFail { task_id, fence, .. }
    | Command::BoardRelease { task_id, fence, .. }
    | Command::BoardExtend { task_id, fence, .. } = &mut command
        && *fence == 0
    {
        let task = parse(task_id).and_then(|key| model.tasks.get(&key));
        *fence = task.map_or(7, |t| t.view.fence);
    }
    command
}

/// A prefetching claim's completions become distinct claimed tasks of the model its team
/// reaches (its own or the cell tier's), presented by the team's supervisor with their
/// current fences (a generated 1 stays a stale fence); the rest are dropped. Any other
/// command is left as it is.
fn resolve_many(mut command: Command, model: &Model) -> Command {
    let Command::BoardClaimMany {
        team,
        caller,
        completes,
        ..
    } = &mut command
    else {
        return command;
    };
    let held = model.tasks.values().filter(|t| {
        t.view.state == TaskState::Claimed && (t.view.team == *team || t.view.tier == Tier::Cell)
    });
    let held: Vec<&TaskView> = held.map(|t| &t.view).collect();
    completes.truncate(held.len());
    for (done, task) in completes.iter_mut().zip(held) {
        done.task_id = task.id.clone();
        if done.fence == 0 {
            done.fence = task.fence;
        }
    }
    if !completes.is_empty()
        && let Some(t) = model.teams.get(team.as_str())
    {
        *caller = t.supervisor.clone();
    }
    command
}

// ----- the properties -----

fn check_views(txn: &MemTxn, model: &Model, now: u64) -> Result<(), TestCaseError> {
    let read = |q: Query| query(txn, now, &q);
    for team in TEAMS {
        let team = team.to_string();
        let got = read(Query::Team { team: team.clone() });
        prop_assert_eq!(got, QueryResult::Team(model.team_view(&team)));
        let got = read(Query::BoardStats { team: team.clone() });
        prop_assert_eq!(got, QueryResult::BoardStats(model.stats(&team)));
        let live = model.teams.contains_key(&team);
        let local = if live {
            model.views(&team, Tier::Local, None)
        } else {
            Vec::new()
        };
        let got = read(Query::BoardList {
            team: team.clone(),
            state: None,
            limit: 0,
        });
        prop_assert_eq!(got, QueryResult::Tasks(local));
        let mut dead = model.views(&team, Tier::Local, Some(TaskState::Dead));
        dead.extend(model.views(&team, Tier::Cell, Some(TaskState::Dead)));
        if !live {
            dead.clear();
        }
        let got = read(Query::BoardDeadLetters {
            team: team.clone(),
            limit: 0,
        });
        prop_assert_eq!(got, QueryResult::Tasks(dead));
        for agent in AGENTS {
            let key = (team.clone(), agent.to_string());
            let kept = model.mail.get(&key).map_or(Vec::new(), |m| m.1.clone());
            let got = read(Query::Mailbox {
                team: team.clone(),
                agent: agent.into(),
                after_seq: 0,
                limit: 0,
            });
            prop_assert_eq!(got, QueryResult::Mailbox(kept));
        }
    }
    let got = read(Query::BoardCellReady { limit: 0 });
    prop_assert_eq!(got, QueryResult::Tasks(model.cell_ready()));
    let got = read(Query::NextDeadline);
    prop_assert_eq!(got, QueryResult::NextDeadline(model.next_deadline()));
    Ok(())
}

/// What the harness learns from the board's outcomes alone.
#[derive(Default)]
struct Observed {
    /// The last delivery handed out per task id (reset by a redrive or a dissolve).
    deliveries: BTreeMap<String, u32>,
    /// The latest claim per task id: (fence, deadline).
    claims: BTreeMap<String, (u64, u64)>,
    /// Tasks posted; `None` once a team was dissolved (its tasks are gone by design).
    posted: Option<u64>,
    /// The highest fence any new claim got: fences only grow, across commands and within a
    /// prefetching one.
    fence_high: u64,
}

impl Observed {
    fn new() -> Self {
        Observed {
            posted: Some(0),
            ..Observed::default()
        }
    }

    fn forget_team(&mut self, team: &str) {
        let of_team = |id: &String| parse(id).is_some_and(|(origin, _)| origin == team);
        self.deliveries.retain(|id, _| !of_team(id));
        self.claims.retain(|id, _| !of_team(id));
        self.posted = None;
    }

    fn see(&mut self, now: u64, command: &Command, outcome: &Outcome) {
        match (command, outcome) {
            (_, Outcome::TaskPosted { .. }) => self.posted = self.posted.map(|n| n + 1),
            (
                _,
                Outcome::TaskClaimed {
                    task,
                    fence,
                    deadline_ms,
                    ..
                },
            ) => {
                let live = self.claims.get(&task.id).copied();
                let reentry = matches!(command, Command::BoardClaimTask { .. })
                    && live.is_some_and(|(f, _)| f == *fence);
                if reentry {
                    // The worker's own live claim again: same delivery and fence, and the
                    // window never moves back.
                    let (_, deadline) = live.expect("a live claim");
                    assert!(*deadline_ms >= deadline, "{} deadline moved back", task.id);
                    self.claims.insert(task.id.clone(), (*fence, *deadline_ms));
                    return;
                }
                self.claimed(task, *fence, *deadline_ms);
            }
            (
                Command::BoardClaimMany { completes, .. },
                Outcome::TasksClaimed { completed, claims },
            ) => {
                for (done, id) in completes.iter().zip(completed) {
                    self.completed(now, done.fence, id);
                }
                for c in claims {
                    self.claimed(&c.task, c.fence, c.deadline_ms);
                }
            }
            (Command::BoardComplete { fence, .. }, Outcome::TaskCompleted { task_id }) => {
                self.completed(now, *fence, task_id);
            }
            (Command::BoardExtend { task_id, .. }, Outcome::TaskExtended { deadline_ms }) => {
                let claim = self.claims.get_mut(task_id).expect("extended a claim");
                assert!(*deadline_ms >= claim.1, "{task_id} deadline moved back");
                claim.1 = *deadline_ms;
            }
            (_, Outcome::TaskRedriven { task_id }) => {
                self.deliveries.remove(task_id);
            }
            (Command::TeamDissolve { team, .. }, Outcome::TeamDissolved { .. }) => {
                self.forget_team(team);
            }
            _ => {}
        }
    }

    /// A new delivery of `task` under `fence`: the next delivery, above every fence before.
    fn claimed(&mut self, task: &TaskView, fence: u64, deadline_ms: u64) {
        let last = self.deliveries.insert(task.id.clone(), task.delivery_count);
        assert_eq!(
            task.delivery_count,
            last.unwrap_or(0) + 1,
            "delivery {} of {} handed out out of order",
            task.delivery_count,
            task.id
        );
        assert!(
            fence > self.fence_high,
            "{} claimed under fence {fence}, not above {}",
            task.id,
            self.fence_high
        );
        self.fence_high = fence;
        self.claims.insert(task.id.clone(), (fence, deadline_ms));
    }

    /// `task_id` completed with `fence`: its live claim's, before its deadline.
    fn completed(&mut self, now: u64, fence: u64, task_id: &str) {
        let (live, deadline) = self.claims.remove(task_id).expect("completed a claim");
        assert_eq!(fence, live, "{task_id} completed with a stale fence");
        assert!(now < deadline, "{task_id} completed after its deadline");
    }

    /// Until a dissolve, every posted task is ready, claimed, done or dead on some board.
    fn check_no_loss(&self, txn: &MemTxn, now: u64) {
        let Some(posted) = self.posted else { return };
        let mut counted = 0;
        let mut cell = 0;
        for team in TEAMS {
            let stats = query(txn, now, &Query::BoardStats { team: team.into() });
            if let QueryResult::BoardStats(Some(s)) = stats {
                counted += s.ready + s.claimed + s.done + s.dead;
                cell = s.cell_ready + s.cell_claimed + s.cell_done + s.cell_dead;
            }
        }
        assert_eq!(counted + cell, posted, "tasks were lost or made up");
    }
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let mut txn = MemTxn::default();
    let mut model = Model::default();
    let mut observed = Observed::new();
    let mut log = Vec::new();
    let mut stamp = Stamp {
        index: 0,
        position: 0,
        time_ms: 1_000_000,
    };
    for step in steps {
        if step.same_entry && stamp.index > 0 {
            stamp.position += FENCES_PER_COMMAND;
        } else {
            stamp = Stamp {
                index: stamp.index + 1,
                position: 0,
                time_ms: stamp.time_ms + step.advance_ms,
            };
        }
        let request = Request::server(None, resolve(step, &model));
        let outcome = apply(&mut txn, stamp, &request).outcome;
        let expected = model.apply(stamp, &request.command);
        prop_assert_eq!(&outcome, &expected, "at {:?} for {:?}", stamp, request);
        observed.see(stamp.time_ms, &request.command, &outcome);
        observed.check_no_loss(&txn, stamp.time_ms);
        check_views(&txn, &model, stamp.time_ms)?;
        log.push((stamp, request));
    }
    let mut replay = MemTxn::default();
    for (stamp, request) in &log {
        apply(&mut replay, *stamp, request);
    }
    prop_assert_eq!(&replay.map, &txn.map, "replay diverged");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn boards_agree_with_the_model(steps in prop::collection::vec(step(), 1..150)) {
        run(&steps)?;
    }
}

/// The generator must reach the interesting outcomes, or the property proves little.
#[test]
fn generated_logs_cover_every_board_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(step(), 150);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..60 {
        let steps = strategy.new_tree(&mut runner).expect("generates").current();
        let mut model = Model::default();
        let mut stamp = Stamp {
            index: 0,
            position: 0,
            time_ms: 1_000_000,
        };
        for step in &steps {
            stamp = Stamp {
                index: stamp.index + 1,
                position: 0,
                time_ms: stamp.time_ms + step.advance_ms,
            };
            let kind = match model.apply(stamp, &resolve(step, &model)) {
                Outcome::TaskClaimed {
                    tier: Tier::Cell, ..
                } => "claimed from the cell tier".to_string(),
                Outcome::BoardRefused { reason } => format!("{reason:?}"),
                Outcome::Ticked { processed } if processed > 0 => "ticked".into(),
                other => format!("{other:?}"),
            };
            seen.insert(kind.split([' ', '{']).next().unwrap_or("").to_string());
        }
    }
    for kind in [
        "TeamCreated",
        "TeamJoined",
        "TeamDissolved",
        "TaskPosted",
        "TaskClaimed",
        "claimed",
        "BoardEmpty",
        "TaskCompleted",
        "TaskReleased",
        "TaskDeadLettered",
        "TaskExtended",
        "TaskRedriven",
        "TasksClaimed",
        "ticked",
        "Invalid",
        "UnknownTeam",
        "TeamExists",
        "NotMember",
        "NotSupervisor",
        "UnknownTask",
        "NotClaimed",
        "StaleFence",
        "ClaimExpired",
        "NotDead",
        "NotReady",
        "Taken",
    ] {
        assert!(
            seen.contains(kind),
            "no {kind} in generated logs; saw {seen:?}"
        );
    }
}
