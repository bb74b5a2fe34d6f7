//! Where a command's words go. The library below the face prints nothing itself: a command
//! that talks while it runs (a long-running listener's address and notices, a report) is handed
//! a [`Console`], and the face (`face::front::console`) decides that its output goes to stdout
//! and its notices to stderr. Tests hand one that keeps what it is told.

use std::sync::Arc;

/// Where output goes (a write that may fail).
type Output = Arc<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;
/// Where notices go.
type Notices = Arc<dyn Fn(&str) + Send + Sync>;

/// A sink of output lines (stdout's job) and notices (stderr's job).
#[derive(Clone)]
pub struct Console {
    out: Output,
    note: Notices,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Console")
    }
}

/// The quiet console: a library caller that hands none gets no words.
impl Default for Console {
    fn default() -> Self {
        Console::quiet()
    }
}

impl Console {
    pub fn new(
        out: impl Fn(&str) -> std::io::Result<()> + Send + Sync + 'static,
        note: impl Fn(&str) + Send + Sync + 'static,
    ) -> Self {
        Console {
            out: Arc::new(out),
            note: Arc::new(note),
        }
    }

    /// A console that drops everything (library callers that want no words).
    pub fn quiet() -> Self {
        Console::new(|_| Ok(()), |_| {})
    }

    /// The command's output (`text` carries its own newlines).
    pub fn out(&self, text: &str) -> std::io::Result<()> {
        (self.out)(text)
    }

    /// A notice for the operator (one line, without its newline).
    pub fn note(&self, line: &str) {
        (self.note)(line)
    }
}
