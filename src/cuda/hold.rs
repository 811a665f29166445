//! Enqueueing commands on a stream, and holding on the host those that
//! cannot go yet: one that waits for something not yet on a device (a
//! user event, or a command itself held), or that follows a held one on
//! its stream, waits in the stream's queue of held commands and is
//! enqueued, in order, by whoever resolves what it waits for.

use super::events::{self, Ev};
use super::loader::{api, take_last_failure, Api};
use super::state::{make_current, Held, Stream, Tail};
use crate::backend::{EventH, QueueH};
use crate::core::error::Result;
use std::sync::Arc;

/// What a held command does once its turn comes: enqueue itself on the
/// stream given (current).
pub type Body = Box<dyn FnOnce(&Api, &Stream, &Enq) -> Result<()> + Send>;

/// What a command's body is told of its enqueue.
pub struct Enq<'a> {
    /// Its place in its stream's order.
    pub seq: u64,
    waits: Waits<'a>,
}

/// What a command waits for: the caller's events, or a held command's.
enum Waits<'a> {
    Direct(&'a [EventH]),
    Held(&'a [Arc<Ev>]),
}

impl Enq<'_> {
    /// Whether everything the command waits for has completed; the driver
    /// is asked only when a body needs to know.
    pub fn waits_ended(&self) -> bool {
        match self.waits {
            Waits::Direct(w) => w.iter().all(|e| events::of(*e).ended()),
            Waits::Held(w) => w.iter().all(|e| e.ended()),
        }
    }
}

/// A held command.
struct Job {
    waits: Vec<Arc<Ev>>,
    ev: Option<Arc<Ev>>,
    body: Body,
}

impl Held for Job {
    fn ready(&self) -> bool {
        self.waits.iter().all(|w| w.resolved())
    }

    fn run(self: Box<Self>, api: &Api, s: &Arc<Stream>, seq: u64, woken: &mut Vec<Arc<Stream>>) {
        let Job { waits, ev, body } = *self;
        take_last_failure();
        let mut elsewhere = false;
        let mut done = wait_all(api, s, waits.iter().map(|w| &**w), &mut elsewhere);
        if let (Ok(()), Some(e)) = (&done, &ev) {
            done = e.start(api, s);
        }
        if done.is_ok() {
            let enq = Enq {
                seq,
                waits: Waits::Held(&waits),
            };
            done = body(api, s, &enq);
        }
        if elsewhere {
            s.changes_host(seq);
        }
        let Some(e) = ev else {
            // Nobody can be told now: the stream's next event is.
            if let Err(err) = done {
                s.lose(events::failure_of(&err), err.message);
            }
            return;
        };
        if done.is_ok() {
            done = e.recorded(api, s, seq, woken);
        }
        match done {
            Err(err) => e.fail(events::failure_of(&err), err.message, woken),
            Ok(()) => report_lost(s, &e, woken),
        }
    }
}

/// Has `e`, the event of a command on `s`, report the failure of a held
/// command before it that had no event of its own (see
/// [`Stream::lose`]).
fn report_lost(s: &Stream, e: &Arc<Ev>, woken: &mut Vec<Arc<Stream>>) {
    if let Some((code, why)) = s.take_lost() {
        e.fail(
            code,
            format!("a command before it without an event failed: {why}"),
            woken,
        );
    }
}

/// Makes `s` (current) wait for each of `waits`; `elsewhere` is set where
/// one is a command of another stream still running, also when a later
/// wait fails (the earlier ones are enqueued).
fn wait_all<'a>(
    api: &Api,
    s: &Stream,
    waits: impl IntoIterator<Item = &'a Ev>,
    elsewhere: &mut bool,
) -> Result<()> {
    for w in waits {
        *elsewhere |= w.wait_on(api, s)?;
    }
    Ok(())
}

/// Whether a command after `waits` must be held on `s` (its tail held).
pub fn must_hold(tail: &Tail, waits: &[EventH]) -> bool {
    !tail.held.is_empty() || !waits.iter().all(|w| events::of(*w).resolved())
}

/// Holds a command after `waits` on `s` (current, its tail held): its
/// event when `want_event`. The caller pumps `s` once it lets go of the
/// tail, in case everything was resolved meanwhile.
pub fn hold(
    api: &Api,
    s: &Arc<Stream>,
    tail: &mut Tail,
    waits: &[EventH],
    want_event: bool,
    body: Body,
) -> Result<Option<EventH>> {
    let ev = if want_event {
        Some(Ev::command(api, s)?)
    } else {
        None
    };
    let waits: Vec<Arc<Ev>> = waits.iter().map(|w| events::share(*w)).collect();
    for w in &waits {
        w.add_waiter(s);
    }
    let handle = ev.as_ref().map(|e| events::handle(e.clone()));
    tail.held.push_back(Box::new(Job { waits, ev, body }));
    Ok(handle)
}

/// What enqueues one command: run at once where nothing holds the
/// command back, or turned into the body a held command keeps.
pub trait Command {
    /// Enqueues the command now, on the stream given (current).
    fn now(self, api: &Api, s: &Stream, enq: &Enq) -> Result<()>;
    /// The body to keep while the command is held.
    fn held(self) -> Body;
}

/// A body that owns what it needs: run as it is, or boxed when held.
struct Owned<F>(F);

impl<F> Command for Owned<F>
where
    F: FnOnce(&Api, &Stream, &Enq) -> Result<()> + Send + 'static,
{
    fn now(self, api: &Api, s: &Stream, enq: &Enq) -> Result<()> {
        (self.0)(api, s, enq)
    }
    fn held(self) -> Body {
        Box::new(self.0)
    }
}

/// A body that borrows from its caller (`now`), and what makes an owned
/// one (`own`) only when the command is held.
struct Borrowing<N, O>(N, O);

impl<N, O> Command for Borrowing<N, O>
where
    N: FnOnce(&Api, &Stream, &Enq) -> Result<()>,
    O: FnOnce() -> Body,
{
    fn now(self, api: &Api, s: &Stream, enq: &Enq) -> Result<()> {
        (self.0)(api, s, enq)
    }
    fn held(self) -> Body {
        (self.1)()
    }
}

/// Runs one command on `q`: after `waits`, `body` enqueues it, and its
/// event goes to `ev` when asked for. The stream's tail is held
/// throughout, so a callback can tell whether anything followed. Where
/// something it waits for is not yet on a device, it is held on the host
/// (see above) and its failures are its event's.
pub fn command<F>(q: QueueH, waits: &[EventH], ev: Option<&mut EventH>, body: F) -> Result<()>
where
    F: FnOnce(&Api, &Stream, &Enq) -> Result<()> + Send + 'static,
{
    run(q, waits, ev, Owned(body))
}

/// Runs one command on `q` as [`command`] does, where what enqueues it
/// comes in two forms: `now`, which may borrow from the caller and runs
/// at once when nothing holds the command back, and `own`, which makes
/// the body a held command keeps (called only when it is held).
pub fn command_or_hold<N, O>(
    q: QueueH,
    waits: &[EventH],
    ev: Option<&mut EventH>,
    now: N,
    own: O,
) -> Result<()>
where
    N: FnOnce(&Api, &Stream, &Enq) -> Result<()>,
    O: FnOnce() -> Body,
{
    run(q, waits, ev, Borrowing(now, own))
}

/// [`command`] and [`command_or_hold`] for any [`Command`].
fn run(q: QueueH, waits: &[EventH], ev: Option<&mut EventH>, cmd: impl Command) -> Result<()> {
    let api = api()?;
    let s = Stream::of(q);
    make_current(api, s.dev.ctx)?;
    let mut tail = s.lock_tail();
    if must_hold(&tail, waits) {
        let arc = Stream::shared(q);
        let made = hold(api, &arc, &mut tail, waits, ev.is_some(), cmd.held())?;
        drop(tail);
        if let (Some(slot), Some(e)) = (ev, made) {
            *slot = e;
        }
        arc.pump();
        return Ok(());
    }
    // Counted whatever happens: a failed body may have enqueued part.
    tail.count += 1;
    let seq = tail.count;
    let mut elsewhere = false;
    let done =
        wait_all(api, s, waits.iter().map(|w| events::of(*w)), &mut elsewhere).and_then(|()| {
            let enq = Enq {
                seq,
                waits: Waits::Direct(waits),
            };
            let Some(slot) = ev else {
                return cmd.now(api, s, &enq);
            };
            let e = Ev::command(api, &Stream::shared(q))?;
            e.start(api, s)?;
            cmd.now(api, s, &enq)?;
            e.recorded_new(api, s, seq)?;
            // Nobody waits for the new event yet: nothing is woken.
            report_lost(s, &e, &mut Vec::new());
            *slot = events::handle(e);
            Ok(())
        });
    // Noted after the command itself: its own waits are its to check.
    if elsewhere {
        s.changes_host(seq);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_held_while_a_user_event_it_waits_for_is_not_complete() {
        let user = Ev::user();
        let other = Ev::user();
        let empty = Tail::default();
        assert!(must_hold(&empty, &[user]));
        assert!(must_hold(&empty, &[other, user]));
        assert!(!must_hold(&empty, &[]));
        assert!(events::complete(user).is_ok());
        assert!(!must_hold(&empty, &[user]));
        assert!(must_hold(&empty, &[user, other]));
        // A second completion is refused, and changes nothing.
        assert!(events::complete(user).is_err());
        assert!(events::complete(other).is_ok());
        assert!(!must_hold(&empty, &[user, other]));
        events::release(user);
        events::release(other);
    }

    #[test]
    fn a_command_behind_a_held_one_is_held_too() {
        struct Nothing;
        impl Held for Nothing {
            fn ready(&self) -> bool {
                false
            }
            fn run(self: Box<Self>, _: &Api, _: &Arc<Stream>, _: u64, _: &mut Vec<Arc<Stream>>) {}
        }
        let mut tail = Tail::default();
        tail.held.push_back(Box::new(Nothing));
        assert!(must_hold(&tail, &[]));
        let done = Ev::user();
        assert!(events::complete(done).is_ok());
        assert!(must_hold(&tail, &[done]));
        events::release(done);
    }
}
