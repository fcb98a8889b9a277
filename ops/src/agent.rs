//! The CLI's agent identity: `--agent NAME` (or `WHIP_AGENT`, default `cli-$USER`) and its
//! token, kept in a credentials file (`WHIP_CREDENTIALS`, default `credentials.json` in the
//! whip config: `WHIP_CONFIG_DIR`, else `~/.config/whip`; mode 0600). The first use of a
//! name creates its token and registers the agent; every call acting for it then proves it
//! with the token. `WHIP_TOKEN` gives the token instead (it is never written to the file);
//! tokens the CLI and the servers make name their agent (`w1.<hex name>.<secret>`), so
//! `WHIP_TOKEN` alone also says who the CLI is.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use whip_cell::{CellClient, CellError};
use whip_proto::v1 as pb;

use crate::Global;
use crate::connect::Session;

/// The environment variable carrying the CLI's own token, instead of the credentials file.
const TOKEN_ENV: &str = "WHIP_TOKEN";

/// `WHIP_TOKEN`, when set and not empty.
fn env_token() -> Option<String> {
    std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty())
}

/// The agent name the CLI acts as: `--agent` (`WHIP_AGENT`), else the agent a `WHIP_TOKEN`
/// names, else `cli-$USER`.
pub(crate) fn agent_name(global: &Global) -> String {
    if let Some(agent) = &global.agent {
        return agent.clone();
    }
    if let Some(agent) = env_token()
        .as_deref()
        .and_then(whip_cell::identity::token_agent)
    {
        return agent;
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "operator".into());
    format!("cli-{user}")
}

/// The CLI's own token for `agent`: `WHIP_TOKEN` when set (never written anywhere), else
/// the credentials file's, made on first use. A `WHIP_TOKEN` naming another agent than
/// `agent` is refused rather than sent.
fn own_token(agent: &str) -> Result<String> {
    let Some(token) = env_token() else {
        return token_for(agent);
    };
    match whip_cell::identity::token_agent(&token) {
        Some(named) if named != agent => Err(anyhow!(
            "{TOKEN_ENV} is agent {named:?}'s token, but the CLI acts as {agent:?} (--agent)"
        )),
        _ => Ok(token),
    }
}

/// The credentials file: `WHIP_CREDENTIALS`, else beside the CA and operator credential in
/// the whip config, so that one `WHIP_CONFIG_DIR` keeps all of a user's whip files.
fn credentials_path() -> PathBuf {
    if let Some(path) = std::env::var_os("WHIP_CREDENTIALS") {
        return PathBuf::from(path);
    }
    whip_cell::tls::config_dir().join("credentials.json")
}

fn load() -> Result<BTreeMap<String, String>> {
    let path = credentials_path();
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("credentials file {} is unreadable", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn save(tokens: &BTreeMap<String, String>) -> Result<()> {
    let path = credentials_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    whip_cell::tls::write_private(&path, &serde_json::to_vec_pretty(tokens)?)?;
    Ok(())
}

/// The token of `agent`, created (and saved) on first use.
fn token_for(agent: &str) -> Result<String> {
    let mut tokens = load()?;
    if let Some(token) = tokens.get(agent) {
        return Ok(token.clone());
    }
    let token = whip_cell::identity::agent_token(agent);
    tokens.insert(agent.to_string(), token.clone());
    save(&tokens)?;
    Ok(token)
}

/// Make `session` act for the CLI's agent: register it (idempotent) and attach its token.
pub(crate) async fn authenticate(global: &Global, session: Session) -> Result<Session> {
    let agent = agent_name(global);
    let token = own_token(&agent)?;
    let register = pb::AgentRegisterRequest {
        agent: agent.clone(),
        token: token.clone(),
        enroll: false,
    };
    // The CLI's own identity rides along: an agent registered before (by the operator, on a
    // machine without the operator credential) proves itself and re-registers as a no-op.
    let session = session.with_client(|client: CellClient| client.with_identity(&agent, &token));
    match session.client.agent_register(register).await {
        Ok(_) => {}
        Err(CellError::Refused {
            code: whip_board::RefusalCode::NameTaken,
            ..
        }) => {
            return Err(anyhow!(
                "agent {agent:?} is registered with another token than the one in {}",
                match env_token() {
                    Some(_) => TOKEN_ENV.to_string(),
                    None => credentials_path().display().to_string(),
                }
            ));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(session)
}

/// Act for the agent `--agent` (or `WHIP_AGENT`) names, when one is named: commands that
/// otherwise act as the operator (`run`, `status`, `cancel`, `kv`, `ledger`, …) honour it
/// rather than ignore it.
pub(crate) async fn act_as_flag(global: &Global, session: Session) -> Result<Session> {
    match global.agent {
        Some(_) => authenticate(global, session).await,
        None => Ok(session),
    }
}

/// Register `member` through `client` (as the operator, or enrolled by the client's agent),
/// keeping its token in the credentials file, unless it is registered already. A refusal
/// is left to the call that needs the registration, which says why.
pub(crate) async fn enroll(client: &CellClient, member: &str) {
    let Ok(token) = token_for(member) else {
        return;
    };
    let register = pb::AgentRegisterRequest {
        agent: member.to_string(),
        token,
        enroll: false,
    };
    if let Err(e) = client.agent_register(register).await {
        tracing::debug!(member, error = %e, "member not registered here");
    }
}

/// `whip agent register`: register the CLI's agent (`--agent`) on the cell or fabric and
/// keep its token in the credentials file.
pub(crate) async fn register(global: &Global) -> Result<std::process::ExitCode> {
    let session = crate::connect::session(global).await?;
    let result = authenticate(global, session).await;
    let agent = agent_name(global);
    let session = result?;
    session.close().await;
    let path = credentials_path();
    if global.json {
        crate::output::json(&serde_json::json!({"agent": agent, "credentials": path}));
    } else {
        crate::output::line(&format!(
            "agent {agent} registered (token in {})",
            path.display()
        ));
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `whip agent enroll NAME`: register NAME enrolled by the CLI's agent (its parent).
pub(crate) async fn enroll_cmd(global: &Global, name: &str) -> Result<std::process::ExitCode> {
    let session = crate::connect::session(global).await?;
    let session = authenticate(global, session).await?;
    let register = pb::AgentRegisterRequest {
        agent: name.to_string(),
        token: token_for(name)?,
        enroll: true,
    };
    let result = session.client.agent_register(register).await;
    session.close().await;
    result?;
    let parent = agent_name(global);
    if global.json {
        crate::output::json(&serde_json::json!({"agent": name, "parent": parent}));
    } else {
        crate::output::line(&format!("agent {name} enrolled by {parent}"));
    }
    Ok(std::process::ExitCode::SUCCESS)
}
