//! What moves while a conductor works, kept apart from what is fixed when it opens.
//!
//! A [`crate::conductor::Conductor`] is driven through a shared `&Conductor`: how the
//! invocation began ([`Begun`]) is fixed at open, and the only state that moves is a
//! [`Cursor`] of cells, each learned once (the engine run, the plan's step count) or
//! replaced per leaf (the write the sandbox refused it).

/// How this invocation stands to the earlier conduct runs of its issue in its work
/// tree; fixed when the conductor opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begun {
    /// No earlier conduct of the issue is open or finished here: a new one starts.
    Fresh,
    /// An earlier conduct of the issue did not finish: this one continues it.
    Resumed,
    /// An earlier conduct finished the issue and its branch still has every step
    /// ticked: this one only publishes it again.
    Finished,
}

/// What moves while a conductor works, and all of it: the engine run it drives and the
/// committed plan's step count, each learned once and never changed after, and the
/// first write the sandbox refused the last leaf. Everything else in a [`crate::conductor::Conductor`]
/// (the work tree, the configuration, the engine, the leaves and providers, the forge,
/// the journal, the issue, the options, how it began) is fixed when it opens, so the
/// loop runs on a shared `&Conductor` and nothing but these cells can move under it.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    /// The engine run of this conduct, once started or found.
    run_id: std::cell::OnceCell<String>,
    /// The committed plan's step count, once read (see `steps_planned`).
    steps_planned: std::cell::OnceCell<u32>,
    /// The first write the sandbox refused the last leaf, if it refused one: what a
    /// bail that blames the agents is said as instead (see `crate::denied`).
    pub(crate) denied: std::cell::RefCell<Option<crate::denied::Denied>>,
}

impl Cursor {
    /// The engine run this conduct drives, once started or found.
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.run_id.get().map(String::as_str)
    }

    /// Takes `id` as the engine run this conduct drives. The run is learned once per
    /// invocation: a run already learned stays, and is what this returns.
    pub(crate) fn found_run(&self, id: String) -> &str {
        self.run_id.get_or_init(|| id)
    }

    /// The committed plan's step count, read with `read` until a plan is committed
    /// (the count is 0 before): a committed plan's steps never change, so the first
    /// count above 0 is kept and `read` is not called again.
    pub(crate) fn steps_planned(&self, read: impl FnOnce() -> u32) -> u32 {
        if let Some(&n) = self.steps_planned.get() {
            return n;
        }
        let n = read();
        if n > 0 {
            let _ = self.steps_planned.set(n);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_first_run_learned_is_the_one_kept() {
        let cursor = Cursor::default();
        assert_eq!(cursor.run_id(), None);
        assert_eq!(cursor.found_run("run-a".into()), "run-a");
        assert_eq!(cursor.found_run("run-b".into()), "run-a");
        assert_eq!(cursor.run_id(), Some("run-a"));
    }

    #[test]
    fn the_step_count_is_read_again_until_a_plan_is_committed_then_kept() {
        let cursor = Cursor::default();
        let reads = Cell::new(0);
        let count = |n: u32| {
            reads.set(reads.get() + 1);
            n
        };
        // Before the plan is committed there are no steps, and that is not kept.
        assert_eq!(cursor.steps_planned(|| count(0)), 0);
        assert_eq!(cursor.steps_planned(|| count(4)), 4);
        // A committed plan's steps never change: it is not read again.
        assert_eq!(cursor.steps_planned(|| count(9)), 4);
        assert_eq!(reads.get(), 2);
    }
}
