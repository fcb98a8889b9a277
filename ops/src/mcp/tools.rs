//! The tool set: one snake_case verb on one noun per tool, each a thin translation of its
//! arguments into one typed client call (the board and the cell decide everything).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

use super::Server;
use super::answer::result;
use super::params::{
    BoardClaim, BoardComplete, BoardExtend, BoardFail, BoardPost, BoardRelease, BudgetConsume,
    DocGet, DocPut, LeaseAcquire, LeaseRelease, LedgerAppend, MailAck, MailInbox, MailReply,
    MailSend, MailSendMany, MailTake, ReleasePaths, ReservePaths, StartSession, VoteCast, VoteOpen,
    VoteShow,
};

#[tool_router(router = tool_router, vis = "pub(super)")]
impl Server {
    /// Start (or resume) your session: registers your work entry (renewed while this server
    /// runs) and answers your inbox, what you hold and your team's board.
    #[tool]
    async fn start_session(&self, Parameters(p): Parameters<StartSession>) -> CallToolResult {
        result(self.agent().start_session(p).await)
    }

    /// Post a task (a JSON object) to a team's board; answers its task_id.
    #[tool]
    async fn board_post(&self, Parameters(p): Parameters<BoardPost>) -> CallToolResult {
        result(self.agent().board_post(p).await)
    }

    /// Claim the oldest ready task of a team's board as yourself; with wait_s, wait for one.
    /// Answers the task (null when none) and the fence every later call on it presents.
    #[tool]
    async fn board_claim(&self, Parameters(p): Parameters<BoardClaim>) -> CallToolResult {
        result(self.agent().board_claim(p).await)
    }

    /// Complete a task you claimed, under its fence, with an optional JSON result.
    #[tool]
    async fn board_complete(&self, Parameters(p): Parameters<BoardComplete>) -> CallToolResult {
        result(self.agent().board_complete(p).await)
    }

    /// Give a claimed task back with an error: redelivered, or dead-lettered at the limit.
    #[tool]
    async fn board_fail(&self, Parameters(p): Parameters<BoardFail>) -> CallToolResult {
        result(self.agent().board_fail(p).await)
    }

    /// Give a claimed task back unfinished (no failure recorded): it is ready again.
    #[tool]
    async fn board_release(&self, Parameters(p): Parameters<BoardRelease>) -> CallToolResult {
        result(self.agent().board_release(p).await)
    }

    /// Extend your claim on a task to by_s seconds from now (never shortens it).
    #[tool]
    async fn board_extend(&self, Parameters(p): Parameters<BoardExtend>) -> CallToolResult {
        result(self.agent().board_extend(p).await)
    }

    /// Send a message (inform, ask, reply, directive) as yourself; answers its id.
    #[tool]
    async fn mail_send(&self, Parameters(p): Parameters<MailSend>) -> CallToolResult {
        result(self.agent().mail_send(p).await)
    }

    /// Send several messages of one type to one recipient in one write, as yourself; each
    /// is delivered or refused on its own, answered in order.
    #[tool]
    async fn mail_send_many(&self, Parameters(p): Parameters<MailSendMany>) -> CallToolResult {
        result(self.agent().mail_send_many(p).await)
    }

    /// Your inbox, oldest first, one page (each message with its trust: untrusted,
    /// authority or server); with wait_s, wait for a message when none waits.
    #[tool]
    async fn mail_inbox(&self, Parameters(p): Parameters<MailInbox>) -> CallToolResult {
        result(self.agent().mail_inbox(p).await)
    }

    /// Acknowledge (remove) your messages through a sequence number.
    #[tool]
    async fn mail_ack(&self, Parameters(p): Parameters<MailAck>) -> CallToolResult {
        result(self.agent().mail_ack(p).await)
    }

    /// Acknowledge your messages through ack_through and take the next ones in one call;
    /// what you take stays hidden from your other takes for visibility_s, then comes back
    /// unless acknowledged. With wait_s, wait for a message when none waits.
    #[tool]
    async fn mail_take(&self, Parameters(p): Parameters<MailTake>) -> CallToolResult {
        result(self.agent().mail_take(p).await)
    }

    /// Reply to a message of your inbox (to its sender, in its thread).
    #[tool]
    async fn mail_reply(&self, Parameters(p): Parameters<MailReply>) -> CallToolResult {
        result(self.agent().mail_reply(p).await)
    }

    /// Consume from a capped budget (a counter per period): ok (charged) or over (nothing
    /// charged).
    #[tool]
    async fn budget_consume(&self, Parameters(p): Parameters<BudgetConsume>) -> CallToolResult {
        result(self.agent().budget_consume(p).await)
    }

    /// Take a slot of a lease as yourself: held (with a fence), contended or waiting;
    /// with wait_s, queue for it.
    #[tool]
    async fn lease_acquire(&self, Parameters(p): Parameters<LeaseAcquire>) -> CallToolResult {
        result(self.agent().lease_acquire(p).await)
    }

    /// Give your slot of a lease back.
    #[tool]
    async fn lease_release(&self, Parameters(p): Parameters<LeaseRelease>) -> CallToolResult {
        result(self.agent().lease_release(p).await)
    }

    /// Append a JSON entry to a ledger partition (you are its appender); answers its seq.
    #[tool]
    async fn ledger_append(&self, Parameters(p): Parameters<LedgerAppend>) -> CallToolResult {
        result(self.agent().ledger_append(p).await)
    }

    /// Open a proposal in your team (coordinators only); answers its id.
    #[tool]
    async fn vote_open(&self, Parameters(p): Parameters<VoteOpen>) -> CallToolResult {
        result(self.agent().vote_open(p).await)
    }

    /// Cast (or replace) your ballot on a proposal.
    #[tool]
    async fn vote_cast(&self, Parameters(p): Parameters<VoteCast>) -> CallToolResult {
        result(self.agent().vote_cast(p).await)
    }

    /// A proposal: its state, outcome, winner, ballots and the count's rounds.
    #[tool]
    async fn vote_show(&self, Parameters(p): Parameters<VoteShow>) -> CallToolResult {
        result(self.agent().vote_show(p).await)
    }

    /// Reserve paths or globs of a repository as yourself, exclusive or shared, for ttl_s:
    /// answers the paths granted (each with its fence) and, for the rest, who holds what
    /// conflicts and until when. Reserving a path you hold again renews it.
    #[tool]
    async fn reserve_paths(&self, Parameters(p): Parameters<ReservePaths>) -> CallToolResult {
        result(self.agent().reserve_paths(p).await)
    }

    /// Release your reservations of paths of a repository (all of yours there when no
    /// paths), optionally only those granted at a fence.
    #[tool]
    async fn release_paths(&self, Parameters(p): Parameters<ReleasePaths>) -> CallToolResult {
        result(self.agent().release_paths(p).await)
    }

    /// Read a team's JSON document and its version (null and 0 when absent).
    #[tool]
    async fn doc_get(&self, Parameters(p): Parameters<DocGet>) -> CallToolResult {
        result(self.agent().doc_get(p).await)
    }

    /// Replace a team's JSON document if it is at expect_version (0: create it).
    #[tool]
    async fn doc_put(&self, Parameters(p): Parameters<DocPut>) -> CallToolResult {
        result(self.agent().doc_put(p).await)
    }
}
