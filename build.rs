// Records the compiler version for the health snapshot's `rustVersion`.
fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OUTRIGGER_RUSTC_VERSION={version}");
    // A fixed-address (non-PIE) executable: the loader has no relative relocations to apply
    // at start, which would otherwise dirty ~7 MB of pages in every process (and every
    // sandbox launcher exec).
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
