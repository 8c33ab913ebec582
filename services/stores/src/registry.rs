//! The one place that names every store. Adding a store is a folder (its flags, its [`Backend`]
//! and [`Store`] implementation, its test fixture) and one line in the `registry!` call below;
//! everything that lists stores derives from that line:
//!
//! - [`StoreKind`] (its `ALL` list, names in flags, metric labels and reconcile output),
//! - [`StoreArgs`] (each store's flags flattened into every service that talks to stores, and
//!   `--stores`, the [`Selection`] of them a deployment has: MySQL and any of the others),
//! - [`connect`], and for tests [`isolate`] (feature `fixture`),
//! - through `StoreKind::ALL`, the writer's `--pool-<store>` flags and reconcile's columns,
//! - through `writer --list-stores` (one name per line), every script that loops over stores,
//!   and the experiment's process columns.
//!
//! Deployment still needs the server itself: `.env.example`, `scripts/stack`, compose.
//! `tests/one_list.rs` fails when a list of stores is written by hand anywhere else.

use crate::{Backend, Selection, Store, StoreError, StoreFlags};
use std::sync::Arc;

macro_rules! registry {
    ($($(#[doc = $doc:literal])* $kind:ident $name:literal $label:literal => $folder:ident :: $store:ident,)*) => {
        /// Which store. The names are the ones used in flags, metric labels and reconcile output.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
        pub enum StoreKind {
            $($(#[doc = $doc])* #[value(name = $name)] #[serde(rename = $name)] $kind,)*
        }

        impl StoreKind {
            /// Every store, in registry order (the order of reconcile's columns and of writes).
            pub const ALL: [StoreKind; [$($name),*].len()] = [$(StoreKind::$kind),*];

            /// The name in flags, metric labels, file names and reconcile output (`mysql`).
            pub fn name(self) -> &'static str {
                match self {
                    $(StoreKind::$kind => $name,)*
                }
            }

            /// The name people write in prose and tables (`MySQL`).
            pub fn label(self) -> &'static str {
                match self {
                    $(StoreKind::$kind => $label,)*
                }
            }
        }

        /// Every store's flags, for the services that talk to stores, and which of them this
        /// deployment has (`--stores`).
        #[derive(Debug, Clone, clap::Args)]
        pub struct StoreArgs {
            /// The stores this deployment has, comma separated (names or labels, or `all`); MySQL,
            /// the system of record, is required. The writer connects to, waits for and writes
            /// only these; reconcile checks, repairs and replays only these.
            #[arg(long = "stores", env = "STORES", value_name = "STORE,...", default_value = "all")]
            pub selection: Selection,
            $(
                #[command(flatten)]
                pub $folder: <crate::$folder::$store as Backend>::Args,
            )*
        }

        impl StoreArgs {
            /// The store links that would carry data in plaintext to another machine.
            pub fn plaintext_links(&self) -> Vec<String> {
                let mut out = Vec::new();
                $(if let Some(host) = self.$folder.plaintext_host().filter(|_| self.selection.contains(StoreKind::$kind)) { out.push(format!("{} at {host}", $name)); })*
                out
            }

            /// Points store `kind`'s link at `to` (`host:port`, a proxy of an experiment
            /// condition) instead of its server; returns the server's `host:port`. See
            /// `flags::redirect_url`.
            pub fn redirect(&mut self, kind: StoreKind, to: &str, secret_dir: &std::path::Path) -> Result<String, StoreError> {
                match kind {
                    $(StoreKind::$kind => crate::flags::redirect_url(kind, self.$folder.url_mut(), to, secret_dir),)*
                }
            }

            /// The environment that gives a child process these same store flags (each flag's
            /// `env` name and value), so tests and the experiment runner can start services
            /// against the same stores. See `flags::flags_env`.
            pub fn env(&self) -> Vec<(String, String)> {
                let mut env = vec![("STORES".to_string(), self.selection.to_string())];
                $(env.extend(crate::flags::flags_env($name, &self.$folder));)*
                env
            }
        }

        /// Connects to every store named, in [`StoreKind::ALL`] order. Connecting does not prepare.
        pub async fn connect(args: &StoreArgs, kinds: &[StoreKind]) -> Result<Vec<Arc<dyn Store>>, StoreError> {
            let mut out: Vec<Arc<dyn Store>> = Vec::new();
            for kind in StoreKind::ALL.into_iter().filter(|k| kinds.contains(k)) {
                out.push(match kind {
                    $(StoreKind::$kind => Arc::new(<crate::$folder::$store as Backend>::connect(&args.$folder).await?),)*
                });
            }
            Ok(out)
        }

        /// Points every selected store's flags at a private namespace named `namespace` (creating
        /// what it needs), so one test or chaos run never sees another's data (see
        /// [`crate::Fixture`]). A store left out of `--stores` is not contacted.
        #[cfg(feature = "fixture")]
        pub async fn isolate(args: &mut StoreArgs, namespace: &str, slot: crate::Slot) -> Result<(), StoreError> {
            $(if args.selection.contains(StoreKind::$kind) {
                <crate::$folder::$store as crate::Fixture>::isolate(&mut args.$folder, namespace, slot).await?;
            })*
            Ok(())
        }
    };
}

registry! {
    /// MySQL / MariaDB, the system of record: 16 shard tables.
    Mysql "mysql" "MySQL" => mysql::MysqlStore,
    /// Redis: one key per message.
    Redis "redis" "Redis" => redis::RedisStore,
    /// Elasticsearch / OpenSearch: one index.
    Es "es" "Elasticsearch" => es::EsStore,
    /// MongoDB: one collection.
    Mongo "mongo" "MongoDB" => mongo::MongoStore,
}

impl StoreArgs {
    /// The stores this deployment has (`--stores`), in registry order: the list to connect.
    pub fn selected(&self) -> &[StoreKind] {
        self.selection.kinds()
    }

    /// The defaults, as a service would see them with no flags (environment still applies).
    pub fn from_env() -> Self {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StoreArgs,
        }
        <P as clap::Parser>::parse_from(["env"]).s
    }
}

impl std::fmt::Display for StoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `env()` is derived from clap's command and serde's field names; this catches a flag whose
    /// id does not follow `STORE-FIELD`: every flag with an `env` name is in it, and parsing it
    /// back gives the same flags.
    #[test]
    fn env_gives_a_child_the_same_store_flags() {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StoreArgs,
        }
        let cmd = <P as clap::CommandFactory>::command();
        let mut args = StoreArgs::from_env();
        args.mysql.pool = 3;
        args.es.index = "other".into();
        let env = args.env();
        for arg in cmd.get_arguments() {
            // A `_FILE` twin is passed instead of its value only when set (see `flags_env`).
            // An optional flag without a value is passed only when set (MYSQL_ADMIN_URL).
            if let Some(name) =
                arg.get_env().and_then(|e| e.to_str()).filter(|n| !n.ends_with("_FILE") && *n != "MYSQL_ADMIN_URL")
            {
                assert!(env.iter().any(|(k, _)| *k == name), "--{} ({name}) is missing from env()", arg.get_id());
            }
        }
        let mut argv = vec!["p".to_string()];
        for arg in cmd.get_arguments() {
            let Some(name) = arg.get_env().and_then(|e| e.to_str()) else { continue };
            let Some((_, v)) = env.iter().find(|(k, _)| *k == name) else { continue };
            argv.push(format!("--{}={v}", arg.get_long().unwrap_or_default()));
        }
        let back = <P as clap::Parser>::parse_from(argv).s;
        assert_eq!(format!("{back:?}"), format!("{args:?}"));
    }

    /// Plaintext to another machine is named; TLS, or loopback, is not.
    #[test]
    fn plaintext_links_to_other_machines_are_named() {
        let mut args = StoreArgs::from_env();
        assert!(args.plaintext_links().is_empty(), "the native stack is on loopback: {:?}", args.plaintext_links());
        args.mysql.url = "mysql://u:p@db.internal:3306/p".into();
        args.redis.url = "rediss://cache.internal:6380/0".into();
        args.es.url = "http://10.0.0.5:9200".into();
        args.mongo.url = "mongodb://m.internal:27017/?tls=true".into();
        assert_eq!(args.plaintext_links(), ["mysql at db.internal", "es at 10.0.0.5"]);
        // A store the deployment does not have is never contacted, so its link is nobody's worry.
        let without_es =
            StoreKind::ALL.into_iter().filter(|k| *k != StoreKind::Es).map(|k| k.name()).collect::<Vec<_>>();
        let all = std::mem::replace(&mut args.selection, without_es.join(",").parse().unwrap());
        assert_eq!(args.plaintext_links(), ["mysql at db.internal"]);
        args.selection = all;
        args.mysql.url = "mysql://u:p@db.internal:3306/p?ssl-mode=VERIFY_IDENTITY".into();
        args.es.url = "https://10.0.0.5:9200".into();
        assert!(args.plaintext_links().is_empty());
    }

    /// A URL given as a file travels to a child as the file's name, never as its content, and
    /// `--help` never shows a URL's value from the environment.
    #[test]
    fn secret_urls_come_from_files_and_stay_out_of_help() {
        let file = std::env::temp_dir().join(format!("mysql-url-{}", std::process::id()));
        std::fs::write(&file, "mysql://u:canary-s3cret@h:3306/db\n").unwrap();
        let mut args = StoreArgs::from_env();
        args.mysql.url_file = Some(file.clone());
        assert_eq!(args.mysql.connection_url().unwrap(), "mysql://u:canary-s3cret@h:3306/db");
        let env = args.env();
        assert!(env.iter().any(|(k, v)| *k == "MYSQL_URL_FILE" && *v == file.display().to_string()));
        assert!(!env.iter().any(|(_, v)| v.contains("canary-s3cret")), "{env:?}");
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            s: StoreArgs,
        }
        let mut cmd = <P as clap::CommandFactory>::command();
        for arg in cmd.get_arguments().filter(|a| a.get_id().as_str().ends_with("-url")) {
            assert!(arg.is_hide_env_values_set(), "--{} shows its environment value in --help", arg.get_id());
        }
        let help = cmd.render_long_help().to_string();
        assert!(help.contains("--mysql-url-file"), "{help}");
    }
}
