//! Log lines written to standard error a block at a time instead of one `write(2)` each.
//!
//! The ingest logs a line per request (the access log); written one by one, those lines were a
//! system call each, on the HTTP worker's thread: a visible part of the ingest's CPU per request
//! next to a server that only answers (the dated bench pages in docs/results). Here a line is
//! copied into a shared buffer, and the buffer is
//! written when it holds 64 KiB, every 200 ms by a thread of its own, at once after a warning or
//! an error (so a problem is never held back), and when the guard `init_tracing` returns is
//! dropped at exit.
//!
//! Hand-written rather than `tracing_appender::non_blocking`: that moves each line to a worker
//! thread through a channel (an allocation per line, and a wake-up of the worker whenever it
//! sleeps), which is the per-request cost this removes.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Written out at this size at the latest.
const BLOCK: usize = 64 << 10;
/// And at least this often.
const EVERY: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Shared {
    buf: Mutex<Vec<u8>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.buf.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes out what is buffered. The buffer is swapped out under the lock and written after
    /// it, so a slow terminal or pipe never holds up a request that logs meanwhile.
    fn flush(&self) {
        let out = std::mem::take(&mut *self.lock());
        if !out.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(&out);
            let _ = err.flush();
        }
    }
}

/// The writer `tracing_subscriber` formats each event into.
#[derive(Clone, Default)]
pub struct BufferedStderr(Arc<Shared>);

impl BufferedStderr {
    /// Starts the thread that writes the buffer out every 200 ms; the guard writes out the rest.
    pub fn start() -> (BufferedStderr, FlushGuard) {
        let w = BufferedStderr::default();
        let weak = Arc::downgrade(&w.0);
        let _ = std::thread::Builder::new().name("log-flush".into()).spawn(move || loop {
            std::thread::sleep(EVERY);
            match weak.upgrade() {
                Some(s) => s.flush(),
                None => return,
            }
        });
        (w.clone(), FlushGuard(w))
    }
}

/// Writes out whatever is still buffered when dropped (keep it alive in `main`).
#[must_use = "the last log lines are written out when this is dropped"]
pub struct FlushGuard(BufferedStderr);

impl Drop for FlushGuard {
    fn drop(&mut self) {
        self.0 .0.flush();
    }
}

/// One event's writer: appends to the buffer; writes the buffer out when it is large, or when the
/// event is a warning or an error.
pub struct EventWriter<'a> {
    shared: &'a Shared,
    urgent: bool,
}

impl Write for EventWriter<'_> {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let full = {
            let mut buf = self.shared.lock();
            buf.extend_from_slice(line);
            buf.len() >= BLOCK
        };
        if full {
            self.shared.flush();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter<'_> {
    fn drop(&mut self) {
        if self.urgent {
            self.shared.flush();
        }
    }
}

impl<'a> MakeWriter<'a> for BufferedStderr {
    type Writer = EventWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter { shared: &self.0, urgent: false }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        EventWriter { shared: &self.0, urgent: *meta.level() <= Level::WARN }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_for_the_block_and_warnings_do_not() {
        let w = BufferedStderr::default();
        {
            let mut e = w.make_writer();
            e.write_all(b"an info line\n").unwrap();
        }
        assert_eq!(w.0.lock().as_slice(), b"an info line\n", "held in the buffer");
        {
            let mut e = EventWriter { shared: &w.0, urgent: true };
            e.write_all(b"a warning\n").unwrap();
        }
        assert!(w.0.lock().is_empty(), "a warning writes everything out");
        {
            let mut e = w.make_writer();
            e.write_all(&vec![b'x'; BLOCK]).unwrap();
        }
        assert!(w.0.lock().is_empty(), "a full block is written out");
    }
}
