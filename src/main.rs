//! `outrigger`: serve JSON-RPC over stdio (default), or run a helper subcommand.

use clap::Parser;
use serde_json::{Value, json};

use outrigger::cli::{Cli, Command};
use outrigger::{config, logging, protocol, serve};

fn main() {
    // The sandbox launcher runs before every sandboxed command: skip building the CLI for it.
    if let Some(code) = outrigger::sandbox::launcher::from_args(std::env::args_os()) {
        std::process::exit(code);
    }
    if let Some(code) = outrigger::sandbox::spare::from_args(std::env::args_os()) {
        std::process::exit(code);
    }
    outrigger::memory::tune();
    let cli = Cli::parse();
    std::process::exit(real_main(cli));
}

fn real_main(cli: Cli) -> i32 {
    if let Some(Command::SandboxExec { spec, probe, argv }) = &cli.command {
        return outrigger::sandbox::launcher::main(spec.as_deref(), *probe, argv);
    }
    if let Some(Command::Schemas { out, ts }) = &cli.command {
        if out.is_none() && ts.is_none() {
            eprintln!("outrigger schemas: pass --out DIR and/or --ts FILE");
            return 2;
        }
        if let Some(out) = out {
            match protocol::write_schemas(out) {
                Ok(n) => eprintln!("wrote {n} schema files to {}", out.display()),
                Err(e) => {
                    eprintln!("outrigger: cannot write schemas to {}: {e}", out.display());
                    return 1;
                }
            }
        }
        if let Some(ts) = ts {
            if let Err(e) = std::fs::write(ts, protocol::table::typescript()) {
                eprintln!("outrigger: cannot write {}: {e}", ts.display());
                return 1;
            }
            eprintln!("wrote {}", ts.display());
        }
        return 0;
    }

    let mut inputs = config::Inputs::from_env();
    if let Some(level) = cli.log_level {
        inputs.cli.insert("log_level".into(), json!(level.as_str()));
    }
    if cli.no_web_tools {
        inputs.cli.insert("web_tools".into(), json!(false));
    }
    if let Some(path) = &cli.storage_path {
        inputs
            .cli
            .insert("storage_path".into(), json!(path.display().to_string()));
    }
    let config = match config::Config::load(&inputs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("outrigger: configuration error: {e}");
            return 2;
        }
    };

    let globals = outrigger::headless::Globals {
        storage_path: cli.storage_path.clone(),
        no_web_tools: cli.no_web_tools,
        log_level: cli.log_level.map(|l| l.as_str().to_string()),
    };
    if let Some(Command::Run(args)) = cli.command {
        return outrigger::headless::run(args, globals, &config);
    }
    if let Some(Command::Acp(args)) = cli.command {
        return outrigger::acp::run(args, globals, &config);
    }

    if let Some(Command::Inspect(args)) = cli.command {
        logging::init(&config.settings().log_level);
        return outrigger::inspect::run(args, cli.storage_path, config.settings().storage_path);
    }

    if cli.dump_config {
        let merged: serde_json::Map<String, Value> = config
            .merged()
            .into_iter()
            .map(|(k, r)| (k.to_string(), json!({"value": r.value, "source": r.source})))
            .collect();
        let text = serde_json::to_string_pretty(&merged).unwrap_or_default();
        #[expect(
            clippy::print_stdout,
            reason = "--dump-config prints the config for a person"
        )]
        {
            println!("{text}");
        }
        return 0;
    }

    if let Some(Command::Mcp { root }) = &cli.command {
        // Logs go to stderr; stdout carries only MCP frames.
        logging::init(&config.settings().log_level);
        return outrigger::mcp::server::run(config, root.clone());
    }

    if let Some(Command::LlmProbe(args)) = cli.command {
        logging::init(&config.settings().log_level);
        let settings = outrigger::llm::LlmSettings::from_settings(&config.settings());
        #[expect(clippy::print_stdout, reason = "llm-probe prints one event per line")]
        let mut print = |event: &serde_json::Value| println!("{event}");
        return outrigger::llm::probe::run(args, settings, &mut print);
    }

    let log = logging::init(&config.settings().log_level);
    serve::run(config, log, cli.quiet_ready)
}
