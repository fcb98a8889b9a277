//! The settings of the servers (`whip node serve`, `whip cell serve`) and `whip config show`.
//!
//! Every setting of a server is one field of its clap struct ([`crate::fabriccmd::NodeServe`],
//! [`crate::cellcmd::CellServe`]), and that one field is all of it: the flag (`--heartbeat-ms`),
//! the environment variable (`WHIP_HEARTBEAT_MS`), the key of the TOML file (`heartbeat-ms`,
//! the flag's name) and the default. Four layers, the first that has a key wins:
//! flags > environment > the file > defaults. The file is `--config FILE`, else
//! `DATA/whip.toml` when the flag or environment names a data directory holding one. A key the
//! server does not have is an error naming it (`deny_unknown_fields`).
//!
//! The merge is pure ([`merge`]); clap tells which layer each parsed value came from
//! ([`arg_sources`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::parser::ValueSource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::Global;
use crate::output::{self, Table};

/// The file a server reads from its data directory when no `--config` is given.
pub(crate) const DATA_DIR_FILE: &str = "whip.toml";

/// Where a setting's value came from, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// A command-line flag.
    Flag,
    /// An environment variable (`WHIP_…`).
    Env,
    /// The TOML file.
    File,
    /// The built-in default.
    Default,
    /// Nowhere: the setting is off, or (for a required one) missing.
    Unset,
}

impl Source {
    fn code(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Env => "env",
            Source::File => "file",
            Source::Default => "default",
            Source::Unset => "unset",
        }
    }
}

/// One layer: setting key → value (keys as in the file, values as JSON).
pub(crate) type Layer = Map<String, Value>;

/// Which layer clap took each parsed argument from, by setting key (`heartbeat-ms`).
pub(crate) type ArgSources = BTreeMap<String, Source>;

/// The sources of the arguments of `matches` (the leaf subcommand's: global flags such as
/// `--insecure` are propagated into it).
pub(crate) fn arg_sources(matches: &clap::ArgMatches) -> ArgSources {
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    leaf.ids()
        .filter_map(|id| {
            let source = match leaf.value_source(id.as_str())? {
                ValueSource::CommandLine => Source::Flag,
                ValueSource::EnvVariable => Source::Env,
                _ => Source::Default,
            };
            Some((id.as_str().replace('_', "-"), source))
        })
        .collect()
}

/// For each key, the value of the first layer that has it, and that layer's source.
/// `layers` are given strongest first.
pub(crate) fn merge(layers: &[(Source, Layer)]) -> BTreeMap<String, (Value, Source)> {
    let mut merged = BTreeMap::new();
    for (source, layer) in layers {
        for (key, value) in layer {
            merged
                .entry(key.clone())
                .or_insert_with(|| (value.clone(), *source));
        }
    }
    merged
}

/// Split the parsed arguments into the flag, environment and default layers by the source
/// clap recorded for each (a key clap did not parse is absent).
pub(crate) fn parsed_layers(parsed: &Layer, sources: &ArgSources) -> [(Source, Layer); 3] {
    let mut layers = [Source::Flag, Source::Env, Source::Default].map(|s| (s, Layer::new()));
    for (key, value) in parsed {
        let Some(source) = sources.get(key) else {
            continue;
        };
        if let Some((_, layer)) = layers.iter_mut().find(|(s, _)| s == source) {
            layer.insert(key.clone(), value.clone());
        }
    }
    layers
}

/// A server's settings struct as a layer: every key, nulls dropped.
fn as_layer<T: Serialize>(value: &T) -> Layer {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Layer::new(),
    }
}

/// The settings of one server, resolved.
pub(crate) struct Effective<T> {
    /// The merged settings (required ones may still be missing: see [`required`]).
    pub(crate) settings: T,
    /// Every key with its value (null when unset) and source.
    pub(crate) origins: BTreeMap<String, (Value, Source)>,
    /// The file read, if any.
    pub(crate) file: Option<PathBuf>,
}

/// Resolve `parsed` (the clap struct, with `sources` from [`arg_sources`]) over the file:
/// `config` if given, else `DATA/whip.toml` if the flag or environment names a data
/// directory that holds one.
pub(crate) fn resolve<T>(
    parsed: &T,
    sources: &ArgSources,
    config: Option<&Path>,
) -> Result<Effective<T>>
where
    T: Serialize + DeserializeOwned + Default,
{
    let [flags, env, defaults] = parsed_layers(&as_layer(parsed), sources);
    let file = match config {
        Some(path) => Some(path.to_path_buf()),
        None => data_dir_file(&flags.1, &env.1),
    };
    let file_layer = match &file {
        Some(path) => read_file::<T>(path)?,
        None => Layer::new(),
    };
    let merged = merge(&[flags, env, (Source::File, file_layer), defaults]);
    let values: Layer = merged
        .iter()
        .map(|(k, (v, _))| (k.clone(), v.clone()))
        .collect();
    let settings: T = serde_json::from_value(Value::Object(values))
        .context("the merged settings do not fit (a bug: each layer was checked)")?;
    let mut origins = merged;
    for key in as_layer_all::<T>() {
        origins.entry(key).or_insert((Value::Null, Source::Unset));
    }
    Ok(Effective {
        settings,
        origins,
        file,
    })
}

/// Every key of `T`, set or not.
fn as_layer_all<T: Serialize + Default>() -> Vec<String> {
    match serde_json::to_value(T::default()) {
        Ok(Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// `DATA/whip.toml` when the flags or environment name `data` and the file exists.
fn data_dir_file(flags: &Layer, env: &Layer) -> Option<PathBuf> {
    let data = flags.get("data").or_else(|| env.get("data"))?.as_str()?;
    let path = Path::new(data).join(DATA_DIR_FILE);
    path.exists().then_some(path)
}

/// Read a TOML file as a layer, checked against `T`: a key `T` does not have or a value of
/// the wrong type is an error naming the file, the key and the line.
fn read_file<T: Serialize + DeserializeOwned + Default>(path: &Path) -> Result<Layer> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    parse_file::<T>(&text).map_err(|e| anyhow!("config file {}: {e}", path.display()))
}

/// Parse the text of a config file as a layer, checked against `T`.
/// serde's `deny_unknown_fields` does not see through the flattened [`ServeCommon`], so the
/// keys are checked here, against every key of `T`.
pub(crate) fn parse_file<T: Serialize + DeserializeOwned + Default>(
    text: &str,
) -> Result<Layer, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let known = as_layer_all::<T>();
    if let Some(key) = table.keys().find(|k| !known.contains(k)) {
        let hint = whip_engine::check::suggest::help(
            key,
            known.iter().map(String::as_str),
            format!("this server's keys: {}", known.join(", ")),
        );
        return Err(format!("unknown key `{key}`: {hint}"));
    }
    toml::from_str::<T>(text).map_err(|e| e.to_string().trim_end().to_string())?;
    match serde_json::to_value(table) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err("the file is not a table of settings".to_string()),
    }
}

/// A required setting, or an error saying the three ways to give it.
pub(crate) fn required<T>(value: Option<T>, key: &str) -> Result<T> {
    value.ok_or_else(|| {
        let env = format!("WHIP_{}", key.to_uppercase().replace('-', "_"));
        anyhow!("{key} is not set: pass --{key}, set {env}, or put `{key} = …` in the config file")
    })
}

/// `whip config show [node|cell] [SERVE FLAGS]`: print the effective settings.
pub(crate) fn show<T: Serialize>(
    global: &Global,
    server: &str,
    effective: &Effective<T>,
) -> ExitCode {
    let file = effective.file.as_ref().map(|p| p.display().to_string());
    if global.json {
        let settings: Map<String, Value> = effective
            .origins
            .iter()
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect();
        let sources: Map<String, Value> = effective
            .origins
            .iter()
            .map(|(k, (_, s))| (k.clone(), Value::from(s.code())))
            .collect();
        output::json(&json!({
            "server": server, "file": file, "settings": settings, "sources": sources,
        }));
        return ExitCode::SUCCESS;
    }
    let file = file.map_or("no config file".to_string(), |f| format!("file {f}"));
    output::line(&format!("whip {server} serve ({file})"));
    let mut table = Table::new(&["key", "value", "source"]);
    for (key, (value, source)) in &effective.origins {
        table.row(vec![
            key.clone(),
            value_text(value),
            source.code().to_string(),
        ]);
    }
    table.print_or("no settings");
    ExitCode::SUCCESS
}

fn value_text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A storage engine as its name in files and JSON (`redb`, `redb-log`, `sled`).
pub(crate) mod storage_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use whip_cell::StorageKind;

    pub(crate) fn serialize<S: Serializer>(kind: &StorageKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<StorageKind, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// A setting stored by its name in files and JSON (`--log node|cell`, `--hibernate on|off`).
pub(crate) trait Named: std::str::FromStr<Err = String> {
    fn name(&self) -> &'static str;
}

impl Named for whip_cell::storage::LogLayout {
    fn name(&self) -> &'static str {
        whip_cell::storage::LogLayout::name(*self)
    }
}

impl Named for whip_cell::LeaseReads {
    fn name(&self) -> &'static str {
        whip_cell::LeaseReads::name(*self)
    }
}

impl Named for whip_fabric::hibernate::Hibernate {
    fn name(&self) -> &'static str {
        whip_fabric::hibernate::Hibernate::name(*self)
    }
}

/// Serde of a [`Named`] setting as its name.
pub(crate) mod by_name {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<T: super::Named, S: Serializer>(
        value: &T,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(value.name())
    }

    pub(crate) fn deserialize<'de, T: super::Named, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The settings every server has. Each field is one setting: its flag, its environment
/// variable and (the flag's name) its key in the config file.
#[derive(clap::Args, Clone, Debug, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub(crate) struct ServeCommon {
    /// Settings file (TOML; keys are the flags' names). Default: DATA/whip.toml if present.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub(crate) config: Option<PathBuf>,
    /// Server id (unique in its cell or fabric, > 0).
    #[arg(long, env = "WHIP_ID")]
    pub(crate) id: Option<u64>,
    /// Address to listen on (`host:port`).
    #[arg(long, env = "WHIP_LISTEN")]
    pub(crate) listen: Option<SocketAddr>,
    /// Address other servers and clients use (default: --listen).
    #[arg(long, env = "WHIP_ADVERTISE")]
    pub(crate) advertise: Option<String>,
    /// Data directory (a node keeps one sub-directory per hosted cell).
    #[arg(long, env = "WHIP_DATA")]
    pub(crate) data: Option<PathBuf>,
    /// Storage engine: redb (default), redb-log or sled.
    #[arg(long, env = "WHIP_STORAGE", default_value = "redb")]
    #[serde(with = "storage_name")]
    pub(crate) storage: whip_cell::StorageKind,
    /// Test-only: add this offset (ms, may be negative) to the server's clock.
    #[arg(
        long,
        env = "WHIP_CLOCK_OFFSET_MS",
        default_value_t = 0,
        allow_hyphen_values = true
    )]
    pub(crate) clock_offset_ms: i64,
    /// Test-only: re-read this file (an offset in ms) every 100 ms and jump the server's
    /// clock to it while it runs (the clock faults of `whip chaos`).
    #[arg(long, env = "WHIP_CLOCK_OFFSET_FILE")]
    pub(crate) clock_offset_file: Option<PathBuf>,
    /// Test-only: re-read this file every 100 ms; while it holds `fsync` or `enospc`, every
    /// log append fails that way (the disk faults of `whip chaos`), and the server stops.
    #[arg(long, env = "WHIP_DISK_FAULT_FILE")]
    pub(crate) disk_fault_file: Option<PathBuf>,
    /// POST every message delivered through this server to an external validator
    /// (`http://HOST:PORT/PATH`, answering `{"verdict": "clean|flagged|quarantined",
    /// "findings": […]}`); the stricter of its verdict and the built-in rule set's wins.
    #[arg(long, env = "WHIP_MAIL_SCREEN_URL")]
    pub(crate) mail_screen_url: Option<String>,
    /// How long the validator may take; past it the built-in verdict stands, marked
    /// `external_unavailable`.
    #[arg(long, env = "WHIP_MAIL_SCREEN_TIMEOUT_MS",
        default_value_t = whip_cell::limits::SCREEN_HOOK_TIMEOUT_MS_DEFAULT)]
    pub(crate) mail_screen_timeout_ms: u64,
    /// What a message gets when the validator does not answer: `closed` (quarantined, the
    /// default) or `open` (the built-in verdict stands, marked `external_unavailable`).
    #[arg(long, env = "WHIP_MAIL_SCREEN_FAIL", default_value = "closed",
        value_parser = ["open", "closed"])]
    pub(crate) mail_screen_fail: String,
    /// Serve metrics (`/metrics`, Prometheus text), health (`/healthz`, `/readyz`) and the
    /// dashboard (`/`) over plain HTTP on this address (`host:port`). Off unless given; it
    /// shows team, lease and mailbox names to whoever reaches it: keep it private.
    #[arg(long, env = "WHIP_HTTP", value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
    /// Serve the MCP tools over Streamable HTTP (`POST /mcp`, each request proven by
    /// `Authorization: Bearer TOKEN` and `X-Whip-Agent: NAME`) on this loopback address.
    /// Off unless given.
    #[arg(long, env = "WHIP_MCP", value_name = "ADDR")]
    pub(crate) mcp: Option<SocketAddr>,
    /// Whether a cell's leader serves linearizable reads under its lease: `on` (the
    /// default: while a quorum acknowledged it within the election timeout less a drift
    /// margin, a read takes no round) or `off` (every read takes a read-index round, for
    /// A/B runs).
    #[arg(long = "lease-reads", env = "WHIP_LEASE_READS", default_value = "on")]
    #[serde(with = "crate::config::by_name")]
    pub(crate) lease_reads: whip_cell::LeaseReads,
    /// Plaintext (the global `--insecure`, `WHIP_INSECURE`): a file can set it too.
    #[arg(skip)]
    pub(crate) insecure: bool,
}

impl ServeCommon {
    /// The settings a server cannot start without.
    pub(crate) fn required(&self) -> Result<(u64, SocketAddr, PathBuf)> {
        let id = required(self.id, "id")?;
        let listen = required(self.listen, "listen")?;
        let data = required(self.data.clone(), "data")?;
        Ok((id, listen, data))
    }

    /// The server's clock offset (test-only, 0 unless set), following
    /// `clock-offset-file` while the server runs when one is given. Call it inside the
    /// server's runtime.
    pub(crate) fn clock_offset(&self) -> whip_cell::ClockOffset {
        let offset = whip_cell::ClockOffset::new(self.clock_offset_ms);
        if let Some(path) = &self.clock_offset_file {
            tracing::warn!(path = %path.display(), "the clock offset follows a file (test-only)");
            offset.follow_file(path.clone());
        }
        offset
    }

    /// The server's disk faults (test-only, none unless `disk-fault-file` is given), and
    /// its stop on a failed log write: a member that cannot write its log serves no
    /// further, so the server exits non-zero saying why (nothing unsynced was
    /// acknowledged). Call it inside the server's runtime.
    pub(crate) fn disk_faults(&self) -> whip_cell::DiskFaults {
        whip_cell::disk_fault::on_log_failure(stop_on_log_failure);
        let faults = whip_cell::DiskFaults::default();
        if let Some(path) = &self.disk_fault_file {
            tracing::warn!(path = %path.display(), "disk faults follow a file (test-only)");
            faults.follow_file(path.clone());
        }
        faults
    }

    /// The address to advertise: `advertise`, else `listen`.
    pub(crate) fn advertised(&self, listen: SocketAddr) -> String {
        self.advertise.clone().unwrap_or_else(|| listen.to_string())
    }

    /// The shared settings within their ranges.
    pub(crate) fn check(&self) -> Result<()> {
        let timeout = self.mail_screen_timeout_ms;
        let max = crate::limits::MAIL_SCREEN_TIMEOUT_MS_MAX;
        if timeout == 0 || timeout > max {
            anyhow::bail!("mail-screen-timeout-ms is {timeout}, it must be 1 to {max}");
        }
        whip_cell::screen_hook::FailMode::parse(&self.mail_screen_fail)
            .map(|_| ())
            .map_err(anyhow::Error::msg)
    }

    /// Install the external mail validator for this process's servers, when one is named.
    pub(crate) fn install_screen(&self) -> Result<()> {
        let Some(url) = &self.mail_screen_url else {
            return Ok(());
        };
        let fail = whip_cell::screen_hook::FailMode::parse(&self.mail_screen_fail)
            .map_err(anyhow::Error::msg)?;
        whip_cell::screen_hook::ScreenHook::parse_with(url, self.mail_screen_timeout_ms, fail)
            .and_then(whip_cell::screen_hook::ScreenHook::install)
            .map_err(anyhow::Error::msg)
    }
}

/// A log write failed: stop the server, non-zero, with the error on stderr.
fn stop_on_log_failure(error: &str) {
    tracing::error!(error, "the log store failed; stopping the server");
    eprintln!("whip: the log store failed ({error}); stopping (nothing unsynced was acknowledged)");
    std::process::exit(crate::limits::EXIT_LOG_FAILED);
}

/// A server's settings struct: [`ServeCommon`] and what only that server has.
pub(crate) trait Serve: Serialize + DeserializeOwned + Default {
    /// The shared settings.
    fn common(&self) -> &ServeCommon;
    /// The shared settings, to fill in.
    fn common_mut(&mut self) -> &mut ServeCommon;
}

impl Serve for ServeCommon {
    fn common(&self) -> &ServeCommon {
        self
    }

    fn common_mut(&mut self) -> &mut ServeCommon {
        self
    }
}

/// Resolve a server's settings as parsed, with the global `--insecure`.
pub(crate) fn effective<T: Serve>(global: &Global, mut parsed: T) -> Result<Effective<T>> {
    parsed.common_mut().insecure = global.insecure;
    let config = parsed.common().config.clone();
    resolve(&parsed, &global.arg_sources, config.as_deref())
}

/// The settings a server runs with, and the global settings with its `insecure`.
pub(crate) fn for_serve<T: Serve>(global: &Global, parsed: T) -> Result<(Global, T)> {
    let settings = effective(global, parsed)?.settings;
    let mut global = global.clone();
    if settings.common().insecure && !global.insecure {
        global.insecure = true;
        crate::security::install_client_default(&global);
    }
    Ok((global, settings))
}

/// `whip config …`.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum ConfigCommand {
    /// Print the settings `whip node serve` would run with and where each comes from (flag,
    /// env, file, default); `whip config show cell …` for `whip cell serve`. Takes the
    /// server's flags, so `whip config show --data DIR` reads DIR/whip.toml.
    #[command(args_conflicts_with_subcommands = true)]
    Show {
        #[command(subcommand)]
        server: Option<ShowServer>,
        #[command(flatten)]
        node: crate::fabriccmd::NodeServe,
    },
}

/// Whose settings `whip config show` prints.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum ShowServer {
    /// `whip node serve`'s (the default).
    Node(crate::fabriccmd::NodeServe),
    /// `whip cell serve`'s.
    Cell(ServeCommon),
}

/// `whip config show`.
pub(crate) fn run(global: &Global, cmd: ConfigCommand) -> Result<ExitCode> {
    let ConfigCommand::Show { server, node } = cmd;
    match server {
        None => Ok(show(global, "node", &effective(global, node)?)),
        Some(ShowServer::Node(node)) => Ok(show(global, "node", &effective(global, node)?)),
        Some(ShowServer::Cell(cell)) => Ok(show(global, "cell", &effective(global, cell)?)),
    }
}

#[cfg(test)]
mod tests {
    //! Goal: flags > environment > file > defaults for every combination, and a file with a
    //! key the server lacks is refused naming the key. Method: the pure merge over all 16
    //! combinations of layers holding a key; the file parser on good and bad files; clap's
    //! sources on a parsed command line.

    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::fabriccmd::NodeServe;

    const ORDER: [Source; 4] = [Source::Flag, Source::Env, Source::File, Source::Default];

    fn layer(key: &str, value: Value) -> Layer {
        let mut layer = Layer::new();
        layer.insert(key.to_string(), value);
        layer
    }

    #[test]
    fn precedence_matrix_first_present_layer_wins() {
        for mask in 0u8..16 {
            let layers: Vec<(Source, Layer)> = ORDER
                .iter()
                .enumerate()
                .map(|(i, s)| match mask & (1 << i) != 0 {
                    true => (*s, layer("heartbeat-ms", json!(100 + i))),
                    false => (*s, Layer::new()),
                })
                .collect();
            let merged = merge(&layers);
            let expected = (0..4).find(|i| mask & (1 << i) != 0);
            match expected {
                Some(i) => assert_eq!(
                    merged.get("heartbeat-ms"),
                    Some(&(json!(100 + i), ORDER[i])),
                    "layers present: {mask:04b}"
                ),
                None => assert!(merged.is_empty(), "no layer has the key"),
            }
        }
    }

    #[test]
    fn keys_merge_independently() {
        let merged = merge(&[
            (Source::Flag, layer("id", json!(3))),
            (Source::Env, layer("listen", json!("127.0.0.1:1"))),
            (Source::File, layer("id", json!(1))),
            (Source::Default, layer("storage", json!("redb"))),
        ]);
        assert_eq!(merged["id"], (json!(3), Source::Flag));
        assert_eq!(merged["listen"], (json!("127.0.0.1:1"), Source::Env));
        assert_eq!(merged["storage"], (json!("redb"), Source::Default));
    }

    #[test]
    fn file_keys_are_the_flags_names() {
        let text = "id = 7\nlisten = \"127.0.0.1:7001\"\nheartbeat-ms = 150\nstorage = \"sled\"\n";
        let layer = parse_file::<NodeServe>(text).unwrap();
        assert_eq!(layer["id"], json!(7));
        assert_eq!(layer["heartbeat-ms"], json!(150));
        assert_eq!(layer["storage"], json!("sled"));
    }

    #[test]
    fn unknown_key_is_refused_by_name() {
        let err = parse_file::<NodeServe>("id = 7\nheartbeat = 150\n").unwrap_err();
        assert!(err.contains("unknown key `heartbeat`"), "{err}");
        assert!(err.contains("did you mean `heartbeat-ms`?"), "{err}");
        // `whip cell serve` has no heartbeat setting, and `config` names the file itself.
        let err = parse_file::<ServeCommon>("heartbeat-ms = 150\n").unwrap_err();
        assert!(err.contains("unknown key `heartbeat-ms`"), "{err}");
        let err = parse_file::<ServeCommon>("config = \"x.toml\"\n").unwrap_err();
        assert!(err.contains("unknown key `config`"), "{err}");
    }

    #[test]
    fn wrong_types_are_refused() {
        for text in [
            "id = \"seven\"",
            "storage = \"floppy\"",
            "listen = \"nowhere\"",
            "[node]",
        ] {
            assert!(
                parse_file::<NodeServe>(text).is_err(),
                "{text} was accepted"
            );
        }
    }

    /// Parse `whip node serve ARGS` as main does: the settings and clap's sources.
    fn parse(args: &[&str]) -> (NodeServe, ArgSources) {
        let argv = [&["whip", "node", "serve"], args].concat();
        let matches = crate::Cli::command().try_get_matches_from(argv).unwrap();
        let cli = crate::Cli::from_arg_matches(&matches).unwrap();
        let crate::Command::Node(crate::fabriccmd::NodeCommand::Serve(node)) = cli.command else {
            panic!("not node serve");
        };
        (node, arg_sources(&matches))
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(DATA_DIR_FILE);
        std::fs::write(
            &file,
            "id = 7\nheartbeat-ms = 150\nelection-timeout-ms = 900\n",
        )
        .unwrap();
        let data = dir.path().to_str().unwrap();
        let (node, sources) = parse(&["--data", data, "--heartbeat-ms", "120"]);
        assert_eq!(sources["heartbeat-ms"], Source::Flag);
        assert_eq!(sources["storage"], Source::Default);
        let effective = resolve(&node, &sources, None).unwrap();
        assert_eq!(effective.file.as_deref(), Some(file.as_path()));
        assert_eq!(effective.settings.heartbeat_ms, 120);
        assert_eq!(effective.settings.election_timeout_ms, 900);
        assert_eq!(effective.settings.common.id, Some(7));
        assert_eq!(effective.origins["id"].1, Source::File);
        assert_eq!(
            effective.origins["storage"],
            (json!("redb"), Source::Default)
        );
        assert_eq!(effective.origins["listen"], (Value::Null, Source::Unset));
        let missing = effective
            .settings
            .common
            .required()
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("listen is not set: pass --listen, set WHIP_LISTEN"),
            "{missing}"
        );
    }

    #[test]
    fn no_data_dir_and_no_config_reads_no_file() {
        let (node, sources) = parse(&[]);
        let effective = resolve(&node, &sources, None).unwrap();
        assert_eq!(effective.file, None);
        assert_eq!(
            effective.settings.heartbeat_ms,
            whip_fabric::limits::NODE_HEARTBEAT_MS
        );
    }
}
