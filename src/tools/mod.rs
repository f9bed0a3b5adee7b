pub mod plugins;
pub mod search;
pub mod skills;
