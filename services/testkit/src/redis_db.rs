//! A Redis database of its own for each test namespace, leased across processes.
//!
//! Redis cannot name a namespace (the `msg:` key format is the stores' contract), so a test gets
//! a database number and empties it. A number fixed per test binary made every binary share it:
//! two binaries at once (cargo-nextest, or two checkouts' suites on one machine) emptied each
//! other's data. A lease is an exclusive lock on a file named for the Redis server and the number,
//! held as long as the namespace lives; the kernel drops it when the process dies, so a killed
//! test leaves nothing to clean up.

use pipeline_stores::Slot;
use std::fs::{File, TryLockError};
use std::path::PathBuf;

/// A leased database number; the lock is released when this is dropped.
pub struct RedisDb {
    number: u8,
    _lock: File,
}

impl RedisDb {
    /// Leases the first free number of [`Slot::LEASED`] on the Redis at `redis_url` (its host and
    /// port name the lock files, so two stacks on one machine do not wait for each other).
    /// Panics when every number is taken: more live namespaces than the stack's databases.
    pub fn lease(redis_url: &str) -> RedisDb {
        let server = url::Url::parse(redis_url)
            .map(|u| format!("{}-{}", u.host_str().unwrap_or("localhost"), u.port().unwrap_or(6379)))
            .unwrap_or_else(|_| "redis".into());
        for number in Slot::LEASED {
            let path = lock_dir().join(format!("pipeline-redis-{server}-db{number}.lock"));
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("opening the Redis lease file {}: {e}", path.display()));
            match file.try_lock() {
                Ok(()) => return RedisDb { number, _lock: file },
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(e)) => panic!("locking {}: {e}", path.display()),
            }
        }
        panic!(
            "every Redis database {:?} is leased by a live test: fewer tests at once, or more `databases` in scripts/stack",
            Slot::LEASED
        )
    }

    /// The slot to pass to the stores' fixture.
    pub fn slot(&self) -> Slot {
        Slot::Leased(self.number)
    }

    /// The database number.
    pub fn number(&self) -> u8 {
        self.number
    }
}

/// The machine's temporary folder: every process of every checkout sees the same locks.
fn lock_dir() -> PathBuf {
    std::env::temp_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_live_leases_never_share_a_number_and_a_dropped_one_is_free_again() {
        let url = format!("redis://127.0.0.1:{}/0", 1 + std::process::id() % 60000);
        let a = RedisDb::lease(&url);
        let b = RedisDb::lease(&url);
        assert_ne!(a.number(), b.number());
        let freed = a.number();
        drop(a);
        let c = RedisDb::lease(&url);
        assert_eq!(c.number(), freed, "the lowest free number is leased first");
        assert!(Slot::LEASED.contains(&b.number()));
    }
}
