//! `config.get`, `config.set`.

use std::sync::Arc;

use serde_json::{Map, json};

use crate::app::App;
use crate::config::Config;
use crate::protocol::{
    ConfigGetParams, ConfigGetResult, ConfigSetParams, ConfigValue, PROTOCOL_VERSION, VERSION,
};
use crate::rpc::error::RpcError;

fn view(config: &Config, merged: bool) -> ConfigGetResult {
    let s = config.settings();
    ConfigGetResult {
        log_level: s.log_level,
        grace_period_seconds: s.grace_period_seconds,
        version: VERSION.into(),
        protocol_version: PROTOCOL_VERSION.into(),
        merged: merged.then(|| {
            config
                .merged()
                .into_iter()
                .map(|(k, r)| {
                    (
                        k.to_string(),
                        ConfigValue {
                            value: r.value,
                            source: r.source.as_str().into(),
                        },
                    )
                })
                .collect()
        }),
    }
}

pub async fn get(app: Arc<App>, p: ConfigGetParams) -> Result<ConfigGetResult, RpcError> {
    let config = app.config();
    Ok(match &p.overrides {
        Some(o) => view(&config.with_overrides(o)?, p.merged),
        None => view(&config, p.merged),
    })
}

pub async fn set(app: Arc<App>, p: ConfigSetParams) -> Result<(), RpcError> {
    let mut changes = Map::new();
    if let Some(level) = &p.log_level {
        changes.insert("log_level".into(), json!(level.to_ascii_uppercase()));
    }
    if changes.is_empty() {
        return Err(RpcError::invalid_params(
            "config.set needs at least one setting, e.g. {\"logLevel\": \"DEBUG\"}",
        ));
    }
    let next = app.config().with_overrides(&changes)?;
    let level = next.settings().log_level;
    app.replace_config(next);
    app.log.set_level(&level);
    tracing::info!("log level is now {level}");
    Ok(())
}
