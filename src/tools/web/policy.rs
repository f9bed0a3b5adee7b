//! What a URL from the model may reach: http(s) only, no credentials, a bounded length, the
//! domain allow/block lists (checked before any DNS), and addresses that are all globally
//! routable unless the config names the host or its network as private-but-allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

/// Longest URL accepted (bytes, as given).
pub const MAX_URL_BYTES: usize = 2048;

/// Why a URL or address is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `invalid_url`, `domain_blocked`, `domain_not_allowed` or `ssrf_blocked`.
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

fn refuse(code: &'static str, message: String) -> Refusal {
    Refusal { code, message }
}

/// Parses and checks a URL's shape. IPv4 hosts written in decimal, octal or hex
/// (`2130706433`, `0x7f000001`, `0177.0.0.1`) come out as dotted quads (WHATWG parsing).
pub fn parse_url(raw: &str) -> Result<Url, Refusal> {
    if raw.len() > MAX_URL_BYTES {
        return Err(refuse(
            "invalid_url",
            format!("the URL is {} bytes; at most {MAX_URL_BYTES}", raw.len()),
        ));
    }
    let url = Url::parse(raw.trim())
        .map_err(|e| refuse("invalid_url", format!("'{raw}' is not a valid URL: {e}")))?;
    check_url(&url)?;
    Ok(url)
}

/// The checks every hop gets: scheme, credentials, a host.
pub fn check_url(url: &Url) -> Result<(), Refusal> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(
            "invalid_url",
            format!(
                "only http and https URLs can be fetched, not {}:",
                url.scheme()
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "invalid_url",
            "URLs with credentials (user:password@) are refused; fetch the public URL".into(),
        ));
    }
    if url.host().is_none() {
        return Err(refuse("invalid_url", format!("{url} has no host")));
    }
    if url.as_str().len() > MAX_URL_BYTES {
        return Err(refuse(
            "invalid_url",
            format!("the URL is longer than {MAX_URL_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// A host as the lists compare it: lowercase, no trailing dot, IPv6 without brackets.
pub fn host_key(url: &Url) -> String {
    url.host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// `entry` covers `host` exactly and every subdomain of it.
fn covers(entry: &str, host: &str) -> bool {
    host == entry || host.strip_suffix(entry).is_some_and(|p| p.ends_with('.'))
}

/// The domain lists: blocked wins; an empty allow list allows every public host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Domains {
    pub allowed: Vec<String>,
    pub blocked: Vec<String>,
}

impl Domains {
    pub fn check(&self, host: &str) -> Result<(), Refusal> {
        if let Some(b) = self.blocked.iter().find(|b| covers(b, host)) {
            return Err(refuse(
                "domain_blocked",
                format!("{host} is blocked by web_blocked_domains ({b})"),
            ));
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|a| covers(a, host)) {
            return Err(refuse(
                "domain_not_allowed",
                format!(
                    "{host} is not in web_allowed_domains ({})",
                    self.allowed.join(", ")
                ),
            ));
        }
        Ok(())
    }

    pub fn allows(&self, host: &str) -> bool {
        self.check(host).is_ok()
    }
}

/// `web_private_hosts`: names (exact) and networks exempt from the global-address rule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrivateHosts {
    names: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

impl PrivateHosts {
    /// Entries: a host name, an address, or a CIDR (`10.0.0.0/8`, `fd00::/8`).
    pub fn parse(entries: &[String]) -> Result<PrivateHosts, String> {
        let mut out = PrivateHosts::default();
        for e in entries {
            let e = e.trim().to_ascii_lowercase();
            if let Some((ip, bits)) = e.split_once('/') {
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| format!("web_private_hosts: '{e}' is not a CIDR"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let bits: u8 =
                    bits.parse().ok().filter(|b| *b <= max).ok_or_else(|| {
                        format!("web_private_hosts: '{e}' has a bad prefix length")
                    })?;
                out.nets.push((ip, bits));
            } else if let Ok(ip) = e.parse::<IpAddr>() {
                out.nets.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else if e.is_empty() {
                return Err("web_private_hosts: empty entry".into());
            } else {
                out.names.push(e.trim_end_matches('.').to_string());
            }
        }
        Ok(out)
    }

    pub fn names(&self, host: &str) -> bool {
        self.names.iter().any(|n| n == host)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|(net, bits)| in_net(ip, *net, *bits))
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        (IpAddr::V6(a), IpAddr::V6(n)) => prefix_eq(&a.octets(), &n.octets(), bits),
        _ => false,
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let full = usize::from(bits / 8);
    if a[..full] != b[..full] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[full] & mask == b[full] & mask
}

/// IPv4-mapped (`::ffff:a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`) addresses as the IPv4 address
/// they carry; others unchanged.
pub fn unwrap_v4(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            ip
        }
        v4 => v4,
    }
}

/// Whether an address is globally routable (after unwrapping mapped and NAT64 forms): not
/// loopback, private, link-local (cloud metadata included), CGNAT, multicast, reserved,
/// benchmarking or documentation space.
pub fn is_global(ip: IpAddr) -> bool {
    match unwrap_v4(ip) {
        IpAddr::V4(v4) => global_v4(v4),
        IpAddr::V6(v6) => global_v6(v6),
    }
}

fn global_v4(ip: Ipv4Addr) -> bool {
    const NOT_GLOBAL: &[([u8; 4], u8)] = &[
        ([0, 0, 0, 0], 8),       // "this network"
        ([10, 0, 0, 0], 8),      // private
        ([100, 64, 0, 0], 10),   // CGNAT
        ([127, 0, 0, 0], 8),     // loopback
        ([169, 254, 0, 0], 16),  // link-local (169.254.169.254 metadata)
        ([172, 16, 0, 0], 12),   // private
        ([192, 0, 0, 0], 24),    // IETF protocol assignments
        ([192, 0, 2, 0], 24),    // TEST-NET-1
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast
        ([192, 168, 0, 0], 16),  // private
        ([198, 18, 0, 0], 15),   // benchmarking
        ([198, 51, 100, 0], 24), // TEST-NET-2
        ([203, 0, 113, 0], 24),  // TEST-NET-3
        ([224, 0, 0, 0], 4),     // multicast
        ([240, 0, 0, 0], 4),     // reserved, broadcast
    ];
    let o = ip.octets();
    !NOT_GLOBAL
        .iter()
        .any(|(net, bits)| prefix_eq(&o, net, *bits))
}

fn global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let o = ip.octets();
    let within = |net: [u16; 8], bits: u8| {
        let n = Ipv6Addr::from(net).octets();
        prefix_eq(&o, &n, bits)
    };
    // Only global unicast (2000::/3) can be global at all.
    if s[0] & 0xe000 != 0x2000 {
        return false;
    }
    !(within([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32) // documentation
        || within([0x2001, 0, 0, 0, 0, 0, 0, 0], 23) // IETF protocol assignments, Teredo
        || within([0x2002, 0, 0, 0, 0, 0, 0, 0], 16) // 6to4: an IPv4 address in disguise
        || within([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20)) // documentation (RFC 9637)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_global_ranges_are_refused() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "3fff::1",
        ] {
            assert!(!is_global(ip(s)), "{s} counted as global");
        }
        for s in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_global(ip(s)), "{s} counted as not global");
        }
    }

    #[test]
    fn ipv4_spellings_are_normalised_by_the_parser() {
        for raw in [
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
        ] {
            let u = parse_url(raw).unwrap();
            assert_eq!(u.host_str(), Some("127.0.0.1"), "{raw}");
        }
        let u = parse_url("http://[::ffff:127.0.0.1]/").unwrap();
        assert_eq!(host_key(&u), "::ffff:7f00:1");
    }

    #[test]
    fn url_shape_is_checked() {
        let e = |s: &str| parse_url(s).unwrap_err().message;
        assert!(e("ftp://x.org/").contains("only http and https"));
        assert!(e("file:///etc/passwd").contains("only http and https"));
        assert!(e("https://user:pw@x.org/").contains("credentials"));
        assert!(e(&format!("https://x.org/{}", "a".repeat(2100))).contains("at most 2048"));
        assert!(e("not a url").contains("not a valid URL"));
    }

    #[test]
    fn domains_cover_subdomains_and_block_wins() {
        let d = Domains {
            allowed: vec!["example.com".into()],
            blocked: vec!["secret.example.com".into()],
        };
        assert!(d.allows("example.com"));
        assert!(d.allows("docs.example.com"));
        assert!(!d.allows("badexample.com"));
        assert!(!d.allows("example.org"));
        assert_eq!(
            d.check("a.secret.example.com").unwrap_err().code,
            "domain_blocked"
        );
        assert!(Domains::default().allows("anything.org"));
    }

    #[test]
    fn private_hosts_take_names_addresses_and_networks() {
        let p = PrivateHosts::parse(&["Docs.Internal".into(), "10.0.0.0/8".into(), "::1".into()])
            .unwrap();
        assert!(p.names("docs.internal"));
        assert!(p.contains(ip("10.9.9.9")));
        assert!(p.contains(ip("::1")));
        assert!(!p.contains(ip("11.0.0.1")));
        assert!(PrivateHosts::parse(&["10.0.0.0/40".into()]).is_err());
    }
}
