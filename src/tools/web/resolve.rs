//! Our DNS for `web_fetch`: resolve once, require every answer to be globally routable (or the
//! host/network exempt by `web_private_hosts`), and hand exactly those addresses to the HTTP
//! client's connector. reqwest asks this resolver for every new connection, so the address it
//! connects to is one that was checked: a rebinding DNS server cannot swap it between check and
//! connect (the reference resolves twice and documents the gap).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::policy::{PrivateHosts, Refusal, is_global};

/// `web_dns_overrides`: answers for listed names instead of DNS. A name may list several
/// answer sets; successive lookups take them in turn (so a test can play a rebinding server).
#[derive(Debug, Default)]
pub struct Overrides {
    map: HashMap<String, (Vec<Vec<IpAddr>>, AtomicUsize)>,
}

impl Overrides {
    /// `{"host": ["ip", …]}` or `{"host": [["ip", …], ["ip", …]]}`.
    pub fn parse(v: &serde_json::Value) -> Result<Overrides, String> {
        let mut map = HashMap::new();
        let obj = match v {
            serde_json::Value::Null => return Ok(Overrides::default()),
            serde_json::Value::Object(o) => o,
            _ => return Err("web_dns_overrides must be an object {\"host\": [\"ip\", …]}".into()),
        };
        let addr = |x: &serde_json::Value, host: &str| -> Result<IpAddr, String> {
            x.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("web_dns_overrides.{host}: {x} is not an IP address"))
        };
        for (host, answers) in obj {
            let list = answers
                .as_array()
                .ok_or_else(|| format!("web_dns_overrides.{host} must be a list of addresses"))?;
            let sets: Vec<Vec<IpAddr>> = if list.iter().all(|x| x.is_array()) && !list.is_empty() {
                list.iter()
                    .map(|set| {
                        set.as_array()
                            .into_iter()
                            .flatten()
                            .map(|x| addr(x, host))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<_, _>>()?
            } else {
                vec![
                    list.iter()
                        .map(|x| addr(x, host))
                        .collect::<Result<_, _>>()?,
                ]
            };
            map.insert(
                host.trim_end_matches('.').to_ascii_lowercase(),
                (sets, AtomicUsize::new(0)),
            );
        }
        Ok(Overrides { map })
    }

    fn get(&self, host: &str) -> Option<Vec<IpAddr>> {
        let (sets, next) = self.map.get(host)?;
        let i = next.fetch_add(1, Ordering::Relaxed);
        sets.get(i % sets.len().max(1)).cloned()
    }
}

/// Resolves and validates; shared by every `web_fetch` client.
#[derive(Debug, Default)]
pub struct Resolver {
    pub overrides: Overrides,
    pub private: PrivateHosts,
}

impl Resolver {
    /// Checks an address the URL names directly (no DNS).
    pub fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), Refusal> {
        if is_global(ip) || self.private.contains(ip) || self.private.names(host) {
            return Ok(());
        }
        Err(not_global(host, ip))
    }

    /// Every address of `host`, all checked; an empty answer is an error.
    pub async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, Refusal> {
        let answers = match self.overrides.get(host) {
            Some(a) => a,
            None => tokio::net::lookup_host((host, 0))
                .await
                .map_err(|e| Refusal {
                    code: "dns_failed",
                    message: format!("cannot resolve {host}: {e}"),
                })?
                .map(|sa| sa.ip())
                .collect(),
        };
        if answers.is_empty() {
            return Err(Refusal {
                code: "dns_failed",
                message: format!("{host} has no addresses"),
            });
        }
        // All answers must pass: a client could be handed any of them.
        for ip in &answers {
            self.check_ip(host, *ip)?;
        }
        Ok(answers)
    }
}

fn not_global(host: &str, ip: IpAddr) -> Refusal {
    // A URL naming an address says so; a name says what it resolved to.
    let what = if host.parse::<IpAddr>().is_ok() {
        format!("{ip}")
    } else {
        format!("{host} resolves to {ip}, which")
    };
    Refusal {
        code: "ssrf_blocked",
        message: format!(
            "{what} is not a public address (loopback, private, link-local, metadata, reserved \
             or documentation space); web_fetch only reaches public hosts (web_private_hosts \
             lists exceptions)"
        ),
    }
}

/// The resolver as reqwest's: the connection goes to the addresses returned here.
#[derive(Clone)]
pub struct Pinned(pub Arc<Resolver>);

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let r = self.0.clone();
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let ips = r.resolve(&host).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The policy refusal inside a reqwest error, if that is why it failed.
pub fn refusal_in(e: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return Some(r.clone());
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn overrides_rotate_and_every_answer_is_checked() {
        let r = Resolver {
            overrides: Overrides::parse(&json!({
                "rebind.test": [["93.184.216.34"], ["127.0.0.1"]],
                "mixed.test": ["93.184.216.34", "10.0.0.1"],
                "ok.test": ["93.184.216.34"]
            }))
            .unwrap(),
            private: PrivateHosts::default(),
        };
        assert_eq!(r.resolve("ok.test").await.unwrap().len(), 1);
        assert_eq!(
            r.resolve("mixed.test").await.unwrap_err().code,
            "ssrf_blocked"
        );
        assert!(r.resolve("rebind.test").await.is_ok());
        assert!(r.resolve("rebind.test").await.is_err());
        assert!(r.resolve("localhost").await.is_err());
    }

    #[test]
    fn malformed_overrides_are_refused() {
        assert!(Overrides::parse(&json!({"a": ["nope"]})).is_err());
        assert!(Overrides::parse(&json!({"a": "1.2.3.4"})).is_err());
        assert!(Overrides::parse(&json!([])).is_err());
    }
}
