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
    link_order(&version);
    println!("cargo:rerun-if-changed=build.rs");
}

/// Places the functions boot and a first turn run next to each other (`link/<profile>.order`,
/// made by scripts/linkorder/regen.sh): scattered, they fault in ~10 MB of the binary at
/// ready; together, ~1.6 MB. Symbol names differ by profile,
/// so each profile has its own file, found by the name of the profile's output directory
/// (`<target>/<profile>/build/<pkg>-<hash>/out`). Only where the linker is known to be rustc's
/// own lld (x86_64 Linux GNU since 1.90, no linker chosen in the flags);
/// `OUTRIGGER_LINK_ORDER=off` leaves it out.
fn link_order(rustc_version: &str) {
    println!("cargo:rerun-if-env-changed=OUTRIGGER_LINK_ORDER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let out_dir = var("OUT_DIR");
    let Some(profile) = std::path::Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
    else {
        return;
    };
    let file = std::path::Path::new(&var("CARGO_MANIFEST_DIR"))
        .join("link")
        .join(format!("{profile}.order"));
    println!("cargo:rerun-if-changed={}", file.display());
    let lld_default = var("TARGET") == "x86_64-unknown-linux-gnu"
        && rustc_version
            .split('.')
            .take(2)
            .map(|n| n.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
            >= vec![1, 90];
    // A linker set in cargo's config or environment reaches build scripts as RUSTC_LINKER;
    // one other than lld (GNU ld) would refuse the flag.
    let linker_chosen =
        !var("RUSTC_LINKER").is_empty() || var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if lld_default && !linker_chosen && var("OUTRIGGER_LINK_ORDER") != "off" && file.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            file.display()
        );
        // Names this build does not have (a changed dependency or toolchain) are skipped.
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
