//! The seccomp layer: `io_uring_*` always fail with EPERM (io_uring can open sockets and
//! files without the syscalls the other layers watch); with the network off, `socket()` for
//! AF_INET, AF_INET6, AF_UNIX, AF_VSOCK and AF_NETLINK fails with EPERM too. Pathname unix
//! sockets (e.g. a docker socket) get past Landlock and a network namespace; only this rule
//! stops them. AF_VSOCK (a VM's channel to its host) and some netlink families are not
//! network-namespaced at all. `socketpair()` stays allowed: build tools use it for local
//! pipes.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The socket families `socket()` refuses when the network is off.
const DENIED_FAMILIES: [libc::c_int; 5] = [
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_UNIX,
    libc::AF_VSOCK,
    libc::AF_NETLINK,
];

fn build(network: bool) -> Result<BpfProgram, String> {
    let err = |e: &dyn std::fmt::Display| format!("seccomp: building the filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for sc in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        // An empty rule list matches the syscall unconditionally.
        rules.insert(sc, Vec::new());
    }
    if !network {
        let mut by_family = Vec::new();
        for family in DENIED_FAMILIES {
            let cond =
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
                    .map_err(|e| err(&e))?;
            by_family.push(SeccompRule::new(vec![cond]).map_err(|e| err(&e))?);
        }
        rules.insert(libc::SYS_socket, by_family);
    }
    let arch = std::env::consts::ARCH.try_into().map_err(|e| err(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    filter.try_into().map_err(|e| err(&e))
}

/// Installs the filter on the calling (single) thread; inherited by everything it runs.
pub fn apply(network: bool) -> Result<(), String> {
    let prog = build(network)?;
    // SAFETY: plain prctl; required before an unprivileged seccomp filter.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "seccomp: PR_SET_NO_NEW_PRIVS failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    seccompiler::apply_filter(&prog).map_err(|e| format!("seccomp: installing the filter: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_compile_for_this_arch() {
        assert!(super::build(false).is_ok());
        assert!(super::build(true).is_ok());
    }
}
