//! MCP server entries: the per-turn `mcp` param and the configured `mcp_servers`, parsed
//! strictly (each problem names its path and the fix), and the `mcp__<server>__<tool>` names.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::tools::{MAX_TOOL_NAME_LEN, json_type_name, sanitize_name};

/// Most servers one turn may start (`mcp` entries).
pub const MAX_TURN_SERVERS: usize = 16;
/// Longest server name kept (sanitised): leaves room for a tool name in 64 characters.
pub const MAX_SERVER_NAME_LEN: usize = 24;
/// Bounds on an entry's strings and lists, so a request cannot make us hold megabytes.
const MAX_ARGS: usize = 256;
const MAX_ENV: usize = 256;
const MAX_TEXT: usize = 8192;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking MCP over its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Relative to the turn's `cwd` (or the workspace for configured servers).
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One server to mount.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEntry {
    /// Sanitised to `[A-Za-z0-9_-]`, at most [`MAX_SERVER_NAME_LEN`] characters.
    pub name: String,
    pub transport: Transport,
}

/// `mcp` of `agent.chat.stream`: stdio entries `{name?, command, args?, env?, cwd?}`.
pub fn parse_turn(v: &Value) -> Result<Vec<ServerEntry>, String> {
    parse_list(v, "mcp", false)
}

/// `mcp_servers` of the config: the per-turn entries, plus `{name, url, headers?}`.
pub fn parse_configured(v: &Value) -> Result<Vec<ServerEntry>, String> {
    parse_list(v, "mcp_servers", true)
}

fn parse_list(v: &Value, key: &str, configured: bool) -> Result<Vec<ServerEntry>, String> {
    let list = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        other => {
            return Err(format!(
                "{key} must be an array of server entries, got {}",
                json_type_name(other)
            ));
        }
    };
    if !configured && list.len() > MAX_TURN_SERVERS {
        return Err(format!(
            "{key} lists {} servers; at most {MAX_TURN_SERVERS} may start per turn",
            list.len()
        ));
    }
    let mut out: Vec<ServerEntry> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let path = format!("{key}[{i}]");
        let entry = parse_entry(item, &path, configured)?;
        if let Some(prev) = out.iter().position(|e| e.name == entry.name) {
            return Err(format!(
                "{path}: duplicate server name '{}' (also {key}[{prev}]); give each entry a distinct \"name\"",
                entry.name
            ));
        }
        out.push(entry);
    }
    Ok(out)
}

fn parse_entry(v: &Value, path: &str, configured: bool) -> Result<ServerEntry, String> {
    let Value::Object(o) = v else {
        return Err(format!(
            "{path} must be an object like {{\"name\": \"time\", \"command\": \"mcp-server-time\"}}, got {}",
            json_type_name(v)
        ));
    };
    let allowed: &[&str] = if configured {
        &["name", "command", "args", "env", "cwd", "url", "headers"]
    } else {
        &["name", "command", "args", "env", "cwd"]
    };
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        let hint = if k == "url" {
            " (Streamable HTTP servers go in the config's mcp_servers)".to_string()
        } else {
            String::new()
        };
        return Err(format!(
            "{path}.{k} is not a field of an MCP server entry{hint}; use {}",
            allowed.join(", ")
        ));
    }
    let transport = if o.contains_key("url") {
        if let Some(k) = ["command", "args", "env", "cwd"]
            .iter()
            .find(|k| o.contains_key(**k))
        {
            return Err(format!(
                "{path}: an entry has either url (Streamable HTTP) or command (stdio), not both; remove {k}"
            ));
        }
        let url = text(o, "url", path)?.unwrap_or_default();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "{path}.url must be an http:// or https:// URL, got \"{url}\""
            ));
        }
        Transport::Http {
            url,
            headers: string_map(o, "headers", path)?,
        }
    } else {
        let command = match text(o, "command", path)? {
            Some(c) if !c.trim().is_empty() => c,
            Some(_) => return Err(format!("{path}.command must not be empty")),
            None => {
                return Err(format!(
                    "{path}.command is required: the program that runs the server, e.g. \"mcp-server-time\""
                ));
            }
        };
        let args = match o.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => {
                if a.len() > MAX_ARGS {
                    return Err(format!(
                        "{path}.args has {} items; at most {MAX_ARGS}",
                        a.len()
                    ));
                }
                a.iter()
                    .enumerate()
                    .map(|(j, x)| match x {
                        Value::String(s) if s.len() <= MAX_TEXT => Ok(s.clone()),
                        Value::String(_) => {
                            Err(format!("{path}.args[{j}] is longer than {MAX_TEXT} bytes"))
                        }
                        other => Err(format!(
                            "{path}.args[{j}] must be a string, got {}",
                            json_type_name(other)
                        )),
                    })
                    .collect::<Result<_, _>>()?
            }
            Some(other) => {
                return Err(format!(
                    "{path}.args must be an array of strings, got {}",
                    json_type_name(other)
                ));
            }
        };
        Transport::Stdio {
            command,
            args,
            env: string_map(o, "env", path)?,
            cwd: text(o, "cwd", path)?.map(PathBuf::from),
        }
    };
    let name = match text(o, "name", path)? {
        Some(n) => {
            let s = sanitize(&n);
            if s.is_empty() {
                return Err(format!(
                    "{path}.name \"{n}\" has no usable characters; use letters, digits, _ or -"
                ));
            }
            s
        }
        None => match &transport {
            Transport::Stdio { command, .. } => {
                let base = command.rsplit('/').next().unwrap_or(command);
                let s = sanitize(base);
                if s.is_empty() {
                    return Err(format!(
                        "{path}: cannot derive a server name from command \"{command}\"; give a \"name\""
                    ));
                }
                s
            }
            Transport::Http { .. } => {
                return Err(format!(
                    "{path}.name is required for a url entry (its tools are named mcp__<name>__<tool>)"
                ));
            }
        },
    };
    Ok(ServerEntry { name, transport })
}

/// An optional string field, bounded.
fn text(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_TEXT => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(format!("{path}.{key} is longer than {MAX_TEXT} bytes")),
        Some(other) => Err(format!(
            "{path}.{key} must be a string, got {}",
            json_type_name(other)
        )),
    }
}

/// An optional `{string: string}` field (`env`, `headers`).
fn string_map(
    o: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<BTreeMap<String, String>, String> {
    let m = match o.get(key) {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(format!(
                "{path}.{key} must be an object of strings, like {{\"TZ\": \"UTC\"}}, got {}",
                json_type_name(other)
            ));
        }
    };
    if m.len() > MAX_ENV {
        return Err(format!(
            "{path}.{key} has {} keys; at most {MAX_ENV}",
            m.len()
        ));
    }
    m.iter()
        .map(|(k, v)| match v {
            Value::String(s)
                if s.len() <= MAX_TEXT && !k.is_empty() && !k.contains(['=', '\0']) =>
            {
                Ok((k.clone(), s.clone()))
            }
            Value::String(_) if k.is_empty() || k.contains(['=', '\0']) => {
                Err(format!("{path}.{key}: \"{k}\" is not a valid name"))
            }
            Value::String(_) => Err(format!("{path}.{key}.{k} is longer than {MAX_TEXT} bytes")),
            other => Err(format!(
                "{path}.{key}.{k} must be a string, got {}",
                json_type_name(other)
            )),
        })
        .collect()
}

/// Characters outside `[A-Za-z0-9_-]` become `_`; cut to [`MAX_SERVER_NAME_LEN`].
pub fn sanitize(s: &str) -> String {
    let mut out = sanitize_name(s);
    out.truncate(MAX_SERVER_NAME_LEN);
    out
}

/// `mcp__<server>__<tool>`, sanitised; a name past 64 characters keeps its start and ends in
/// a short hash of the whole, so two long names stay distinct.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{server}__{}", sanitize_name(tool));
    if full.len() <= MAX_TOOL_NAME_LEN {
        return full;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let suffix = hex::encode(&digest[..4]);
    let keep = MAX_TOOL_NAME_LEN - suffix.len() - 1;
    format!("{}_{suffix}", &full[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_parse_with_defaults_and_sanitised_names() {
        let v = json!([
            {"command": "/usr/local/bin/mcp-server-time"},
            {"name": "my git!", "command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}, "cwd": "sub"}
        ]);
        let e = parse_turn(&v).unwrap();
        assert_eq!(e[0].name, "mcp-server-time");
        assert_eq!(e[1].name, "my_git_");
        assert_eq!(
            e[1].transport,
            Transport::Stdio {
                command: "uvx".into(),
                args: vec!["mcp-server-git".into()],
                env: BTreeMap::from([("A".into(), "1".into())]),
                cwd: Some(PathBuf::from("sub")),
            }
        );
    }

    #[test]
    fn malformed_entries_name_the_path() {
        let cases = [
            (json!({}), "mcp must be an array"),
            (json!([{}]), "mcp[0].command is required"),
            (
                json!([{"command": " "}]),
                "mcp[0].command must not be empty",
            ),
            (json!([{"command": 3}]), "mcp[0].command must be a string"),
            (
                json!([{"command": "x", "args": "a"}]),
                "mcp[0].args must be an array",
            ),
            (
                json!([{"command": "x", "args": [1]}]),
                "mcp[0].args[0] must be a string",
            ),
            (
                json!([{"command": "x", "env": {"A": 1}}]),
                "mcp[0].env.A must be a string",
            ),
            (
                json!([{"command": "x", "bogus": 1}]),
                "mcp[0].bogus is not a field",
            ),
            (json!([{"url": "http://x"}]), "mcp[0].url is not a field"),
            (json!(["x"]), "mcp[0] must be an object"),
            (
                json!([{"command": "a/x"}, {"name": "x", "command": "y"}]),
                "mcp[1]: duplicate server name 'x'",
            ),
        ];
        for (v, want) in cases {
            let e = parse_turn(&v).unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn configured_entries_take_urls() {
        let v =
            json!([{"name": "web", "url": "http://127.0.0.1:3001/mcp", "headers": {"X-K": "v"}}]);
        let e = parse_configured(&v).unwrap();
        assert!(matches!(&e[0].transport, Transport::Http { url, .. } if url.ends_with("/mcp")));
        let bad = json!([{"url": "ftp://x"}]);
        assert!(
            parse_configured(&bad)
                .unwrap_err()
                .contains("http:// or https://")
        );
        let both = json!([{"name": "a", "url": "http://x", "command": "y"}]);
        assert!(parse_configured(&both).unwrap_err().contains("not both"));
    }

    #[test]
    fn long_tool_names_stay_valid_and_distinct() {
        assert_eq!(
            tool_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        let a = tool_name("server", &"a".repeat(80));
        let b = tool_name("server", &format!("{}b", "a".repeat(79)));
        assert!(crate::tools::valid_tool_name(&a), "{a}");
        assert_eq!(a.len(), MAX_TOOL_NAME_LEN);
        assert_ne!(a, b);
        assert_eq!(tool_name("s", "get.thing"), "mcp__s__get_thing");
    }
}
