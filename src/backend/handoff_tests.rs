//! Tests of submission on Syrah's thread against a fake back end that
//! logs its calls, fails chosen ones and can hold the thread in a launch:
//! the order of the driver's calls, events before and after the thread
//! has them, and how failures the caller cannot be told of at once reach
//! it.

use super::handoff::NOT_ENQUEUED;
use super::handoff_driver::threaded;
use super::*;
use crate::core::error::Result;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Kernel whose launches fail, and argument index whose settings fail.
const BAD_KERNEL: usize = 13;
const BAD_INDEX: u32 = 7;
/// The value the fake refuses for argument [`BAD_INDEX`].
const BAD_VALUE: usize = 0xbad;
/// Kernel whose launches wait until the gate opens.
const SLOW_KERNEL: usize = 21;

#[derive(Default)]
struct Fake {
    log: Mutex<Vec<String>>,
    events: AtomicUsize,
    /// An event the fake says is still running (0: none).
    running: AtomicUsize,
    /// Closed while true.
    gate: Mutex<bool>,
    opened: Condvar,
}

impl Fake {
    fn new() -> &'static Fake {
        Box::leak(Box::new(Fake::default()))
    }
    fn note(&self, s: String) {
        self.log.lock().push(s);
    }
    fn event(&self, ev: Option<&mut EventH>) -> String {
        match ev {
            Some(slot) => {
                *slot = EventH(1000 + self.events.fetch_add(1, Ordering::AcqRel));
                format!(" -> {}", slot.0)
            }
            None => String::new(),
        }
    }
    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock())
    }
}

fn failed(call: &str) -> Error {
    Error::new(Status::Opencl, format!("{call} failed in the fake"))
}

impl Driver for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn release_event(&self, e: EventH) {
        self.note(format!("release event {}", e.0));
    }
    fn event_status(&self, e: EventH) -> Result<i32> {
        Ok(if e.0 == self.running.load(Ordering::Acquire) {
            RUNNING
        } else {
            COMPLETE
        })
    }
    fn wait_event(&self, _e: EventH) -> Result<i32> {
        Ok(0)
    }
    fn create_user_event(&self, _ctx: ContextH) -> Result<EventH> {
        let mut e = EventH::NONE;
        self.event(Some(&mut e));
        Ok(e)
    }
    fn complete_user_event(&self, _e: EventH) -> Result<()> {
        Ok(())
    }
    fn on_end(&self, e: EventH, f: EndCallback, user: *mut c_void) -> Result<()> {
        // Every command of the fake has ended: called at once, here.
        // SAFETY: as the seam promises, once, with the user data given.
        unsafe { f(e.0 as *mut c_void, COMPLETE, user) };
        Ok(())
    }
    fn timestamp(&self, _e: EventH, _which: Stamp) -> Result<u64> {
        Ok(0)
    }
    fn native_object(&self, _of: NativeOf) -> usize {
        0
    }
    fn create_context(&self, _devices: &[DeviceH]) -> Result<ContextH> {
        Ok(ContextH(1))
    }
    fn release_context(&self, _ctx: ContextH) {}
    fn create_queue(&self, _ctx: ContextH, _dev: DeviceH, _timed: bool) -> Result<QueueH> {
        Ok(QueueH(77))
    }
    fn release_queue(&self, _q: QueueH) {}
    fn flush(&self, q: QueueH) {
        self.note(format!("flush {}", q.0));
    }
    fn finish(&self, q: QueueH) -> Result<()> {
        self.note(format!("finish {}", q.0));
        Ok(())
    }
    fn enqueue_marker(&self, _q: QueueH, waits: &[EventH]) -> Result<EventH> {
        let mut e = EventH::NONE;
        let to = self.event(Some(&mut e));
        self.note(format!("marker after {:?}{to}", ids(waits)));
        Ok(e)
    }
    fn usm_alloc(
        &self,
        _ctx: ContextH,
        _usm: UsmStrategy,
        _kind: AllocKind,
        _dev: Option<DeviceH>,
        _size: usize,
        _align: usize,
        _atomics: bool,
    ) -> Result<usize> {
        Ok(4096)
    }
    fn usm_free(&self, _ctx: ContextH, _usm: UsmStrategy, ptr: usize) {
        self.note(format!("free {ptr}"));
    }
    fn build_program(
        &self,
        _ctx: ContextH,
        _devices: &[(DeviceH, String)],
        _input: ProgramInput<'_>,
        _options: &str,
    ) -> Result<ProgramH> {
        Ok(ProgramH(1))
    }
    fn release_program(&self, _p: ProgramH) {}
    fn program_binaries(&self, _p: ProgramH) -> Result<Vec<Vec<u8>>> {
        Ok(Vec::new())
    }
    fn build_log(&self, _p: ProgramH, _d: DeviceH) -> String {
        String::new()
    }
    fn kernel_names(&self, _p: ProgramH) -> Vec<String> {
        Vec::new()
    }
    fn create_kernel(
        &self,
        _p: ProgramH,
        name: &str,
        _usm: UsmStrategy,
    ) -> Result<(KernelH, u32, String)> {
        Ok((KernelH(5), 1, name.to_string()))
    }
    fn kernel_facts(&self, _k: KernelH, _d: DeviceH) -> KernelFacts {
        KernelFacts::default()
    }
    fn release_kernel(&self, k: KernelH) {
        self.note(format!("release kernel {}", k.0));
    }
    fn create_mem(&self, _ctx: ContextH, _size: usize) -> Result<MemH> {
        Ok(MemH(9))
    }
    fn create_sub_mem(&self, m: MemH, _offset: usize, _size: usize) -> Result<MemH> {
        Ok(m)
    }
    fn create_view(&self, _ctx: ContextH, _ptr: usize, _size: usize) -> Option<MemH> {
        None
    }
    fn enqueue_copy(
        &self,
        q: QueueH,
        _dst: Side,
        _src: Side,
        len: usize,
        _blocking: bool,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let to = self.event(ev);
        self.note(format!("copy {len} on {} after {:?}{to}", q.0, ids(waits)));
        Ok(())
    }
    fn enqueue_copy_rect(
        &self,
        _q: QueueH,
        _dst: &RectSide,
        _src: &RectSide,
        _region: [usize; 3],
        _blocking: bool,
        _waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        self.event(ev);
        Ok(())
    }
    fn enqueue_fill_mem(
        &self,
        _q: QueueH,
        _m: MemH,
        _offset: usize,
        pattern: &[u8],
        _len: usize,
        _waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let to = self.event(ev);
        self.note(format!("fill {pattern:?}{to}"));
        Ok(())
    }
    fn set_kernel_arg(
        &self,
        k: KernelH,
        _usm: UsmStrategy,
        index: u32,
        arg: ArgSet<'_>,
    ) -> Result<()> {
        if index == BAD_INDEX && matches!(arg, ArgSet::Usm(BAD_VALUE)) {
            return Err(failed("clSetKernelArg"));
        }
        self.note(format!("set {} {index} {}", k.0, arg.describe()));
        Ok(())
    }
    fn retain_mem(&self, m: MemH) {
        self.note(format!("retain {}", m.0));
    }
    fn release_mem(&self, m: MemH) {
        self.note(format!("release {}", m.0));
    }
    fn enqueue_kernel(
        &self,
        _q: QueueH,
        k: KernelH,
        name: &str,
        _local_args: bool,
        _range: &NdRange,
        waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        if k.0 == SLOW_KERNEL {
            let mut closed = self.gate.lock();
            while *closed {
                self.opened.wait(&mut closed);
            }
        }
        if k.0 == BAD_KERNEL {
            return Err(failed("clEnqueueNDRangeKernel"));
        }
        let to = self.event(ev);
        self.note(format!("launch {name} after {:?}{to}", ids(waits)));
        Ok(())
    }
    fn enqueue_memcpy(
        &self,
        _q: QueueH,
        _usm: UsmStrategy,
        _dst: usize,
        _src: usize,
        size: usize,
        _host: HostEnd,
        _waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        let to = self.event(ev);
        self.note(format!("memcpy {size}{to}"));
        Ok(())
    }
    fn enqueue_fill(
        &self,
        _q: QueueH,
        _usm: UsmStrategy,
        _dst: usize,
        _pattern: &[u8],
        _size: usize,
        _waits: &[EventH],
        ev: Option<&mut EventH>,
    ) -> Result<()> {
        self.event(ev);
        Ok(())
    }
    fn can_migrate(&self, _usm: UsmStrategy) -> bool {
        false
    }
    fn enqueue_migrate(
        &self,
        _q: QueueH,
        _usm: UsmStrategy,
        _ptr: usize,
        _size: usize,
        _waits: &[EventH],
        _ev: &mut EventH,
    ) -> Result<bool> {
        Ok(false)
    }
    fn can_advise(&self, _usm: UsmStrategy) -> bool {
        false
    }
    fn enqueue_advise(
        &self,
        _q: QueueH,
        _usm: UsmStrategy,
        _ptr: usize,
        _size: usize,
        _advice: u32,
        _waits: &[EventH],
        _ev: &mut EventH,
    ) -> Result<bool> {
        Ok(false)
    }
}

fn ids(waits: &[EventH]) -> Vec<usize> {
    waits.iter().map(|e| e.0).collect()
}

/// A fake back end, wrapped, and a lane of it.
fn setup() -> (&'static Fake, &'static dyn Driver, QueueH) {
    let fake = Fake::new();
    let d = threaded(fake).expect("the submission thread starts");
    let q = d
        .create_queue(ContextH(1), DeviceH(1), false)
        .expect("the fake makes queues");
    (fake, d, q)
}

fn range() -> NdRange {
    NdRange {
        dims: 1,
        global: [64, 1, 1],
        local: None,
        offset: [0; 3],
    }
}

fn launch(d: &dyn Driver, q: QueueH, k: usize, waits: &[EventH], ev: bool) -> EventH {
    let mut e = EventH::NONE;
    let slot = if ev { Some(&mut e) } else { None };
    d.enqueue_kernel(q, KernelH(k), "k", false, &range(), waits, slot)
        .expect("a launch is queued");
    e
}

#[test]
fn calls_reach_the_driver_in_the_order_asked_with_its_own_events() {
    let (fake, d, q) = setup();
    d.set_kernel_arg(
        KernelH(5),
        UsmStrategy::Svm,
        0,
        ArgSet::Bytes(&[1, 2, 3, 4]),
    )
    .expect("queued");
    d.retain_mem(MemH(9));
    let e1 = launch(d, q, 5, &[], true);
    d.release_mem(MemH(9));
    let e2 = d.enqueue_marker(q, &[e1]).expect("queued");
    d.finish(q).expect("nothing failed");
    assert_eq!(
        fake.taken(),
        [
            "set 5 0 value of 4 bytes",
            "retain 9",
            "launch k after [] -> 1000",
            "release 9",
            "marker after [1000] -> 1001",
            "finish 77",
        ]
    );
    assert_eq!(d.event_status(e2), Ok(COMPLETE));
    assert_eq!(d.wait_event(e2), Ok(0));
    d.release_event(e1);
    d.release_event(e2);
    d.finish(q).expect("nothing failed");
    assert_eq!(
        fake.taken(),
        ["release event 1000", "release event 1001", "finish 77"]
    );
}

#[test]
fn a_command_the_thread_has_not_enqueued_is_queued_and_waits_wait_for_it() {
    let (fake, d, q) = setup();
    *fake.gate.lock() = true;
    let first = launch(d, q, SLOW_KERNEL, &[], true);
    let second = launch(d, q, 5, &[first], true);
    // The thread is held in the first launch: neither has a driver event.
    assert_eq!(d.event_status(second), Ok(QUEUED));
    *fake.gate.lock() = false;
    fake.opened.notify_all();
    assert_eq!(d.wait_event(second), Ok(0));
    assert_eq!(d.event_status(second), Ok(COMPLETE));
    assert_eq!(
        fake.taken(),
        ["launch k after [] -> 1000", "launch k after [1000] -> 1001"]
    );
}

#[test]
fn a_failure_without_an_event_fails_the_next_wait_and_event_once() {
    let (fake, d, q) = setup();
    launch(d, q, BAD_KERNEL, &[], false);
    let e = d.finish(q).expect_err("the failed launch is reported");
    assert!(
        e.message.contains("clEnqueueNDRangeKernel failed"),
        "{}",
        e.message
    );
    // The queue's next event reports it, and takes it.
    let m = d.enqueue_marker(q, &[]).expect("queued");
    assert_eq!(d.wait_event(m), Ok(-14));
    assert_eq!(d.event_status(m), Ok(NOT_ENQUEUED));
    let why = d.failure_detail(m).unwrap_or_default();
    assert!(
        why.starts_with("a command before it without an event failed: clEnqueueNDRangeKernel"),
        "{why}"
    );
    assert_eq!(d.finish(q), Ok(()));
    // An event that reports an earlier failure ends when its own command
    // does: what its command keeps alive must not go before.
    launch(d, q, BAD_KERNEL, &[], false);
    let running = d.enqueue_marker(q, &[]).expect("queued");
    // The marker took the failure to report.
    assert_eq!(d.finish(q), Ok(()));
    fake.running.store(1001, Ordering::Release);
    assert_eq!(d.event_status(running), Ok(RUNNING));
    fake.running.store(0, Ordering::Release);
    assert_eq!(d.event_status(running), Ok(NOT_ENQUEUED));
    let later = d.enqueue_marker(q, &[]).expect("queued");
    assert_eq!(d.wait_event(later), Ok(0));
    assert_eq!(d.failure_detail(later), None);
    assert_eq!(
        fake.taken(),
        [
            "finish 77",
            "marker after [] -> 1000",
            "finish 77",
            "marker after [] -> 1001",
            "finish 77",
            "marker after [] -> 1002"
        ]
    );
}

#[test]
fn a_first_setting_of_its_kind_is_made_by_the_call_and_fails_it() {
    let (fake, d, q) = setup();
    let k = KernelH(5);
    let e = d
        .set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(BAD_VALUE))
        .expect_err("refused");
    assert!(e.message.contains("clSetKernelArg failed"), "{}", e.message);
    // Taken once, a pointer goes to the thread; a value of another size
    // is made by the call again.
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(64))
        .expect("set");
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(128))
        .expect("queued");
    d.set_kernel_arg(k, UsmStrategy::Svm, 2, ArgSet::Bytes(&[1, 0, 0, 0]))
        .expect("set");
    d.set_kernel_arg(k, UsmStrategy::Svm, 2, ArgSet::Bytes(&[2, 0, 0, 0]))
        .expect("queued");
    d.set_kernel_arg(k, UsmStrategy::Svm, 2, ArgSet::Bytes(&[3, 0]))
        .expect("set");
    let ok = launch(d, q, 5, &[], true);
    assert_eq!(d.wait_event(ok), Ok(0));
    assert_eq!(
        fake.taken(),
        [
            "set 5 7 USM pointer 0x40",
            "set 5 7 USM pointer 0x80",
            "set 5 2 value of 4 bytes",
            "set 5 2 value of 4 bytes",
            "set 5 2 value of 2 bytes",
            "launch k after [] -> 1000"
        ]
    );
}

#[test]
fn a_failed_argument_fails_launches_until_it_is_set_again() {
    let (fake, d, q) = setup();
    let k = KernelH(5);
    // Taken once by the call, then refused on the thread.
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(64))
        .expect("set");
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(BAD_VALUE))
        .expect("queued");
    let bad = launch(d, q, 5, &[], true);
    assert_eq!(d.wait_event(bad), Ok(-14));
    let why = d.failure_detail(bad).unwrap_or_default();
    assert!(
        why.contains("setting its argument 7 failed: clSetKernelArg failed"),
        "{why}"
    );
    // A command waiting for it cannot be enqueued either.
    let after = d.enqueue_marker(q, &[bad]).expect("queued");
    assert_eq!(d.wait_event(after), Ok(-14));
    assert_eq!(d.event_status(after), Ok(NOT_ENQUEUED));
    let why = d.failure_detail(after).unwrap_or_default();
    assert!(
        why.starts_with("it waits for a command that could not be enqueued"),
        "{why}"
    );
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX - 1, ArgSet::Usm(64))
        .expect("set");
    let still = launch(d, q, 5, &[], true);
    assert_eq!(d.wait_event(still), Ok(-14));
    // Set again, the argument lets launches go.
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(128))
        .expect("queued");
    let fine = launch(d, q, 5, &[], true);
    assert_eq!(d.wait_event(fine), Ok(0));
    // Releasing the kernel forgets its failures and what the driver took.
    d.set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(BAD_VALUE))
        .expect("queued");
    d.release_kernel(k);
    let e = d
        .set_kernel_arg(k, UsmStrategy::Svm, BAD_INDEX, ArgSet::Usm(BAD_VALUE))
        .expect_err("made by the call again");
    assert!(e.message.contains("clSetKernelArg failed"), "{}", e.message);
    let log = fake.taken();
    assert_eq!(
        log,
        [
            "set 5 7 USM pointer 0x40",
            "set 5 6 USM pointer 0x40",
            "set 5 7 USM pointer 0x80",
            "launch k after [] -> 1000",
            "release kernel 5"
        ]
    );
}

#[test]
fn a_queue_not_made_through_it_gets_the_drivers_own_events() {
    let (fake, d, _q) = setup();
    let mut e = EventH::NONE;
    let side = Side { mem: None, at: 0 };
    d.enqueue_copy(QueueH(5), side, side, 16, false, &[], Some(&mut e))
        .expect("copied");
    assert_eq!(e, EventH(1000));
    assert_eq!(fake.taken(), ["copy 16 on 5 after [] -> 1000"]);
}

/// Which threads the test callbacks ran on, and what they were told.
static ENDED: Mutex<Vec<(String, usize, i32)>> = Mutex::new(Vec::new());

unsafe extern "C" fn ended(ev: *mut c_void, status: i32, _user: *mut c_void) {
    let name = std::thread::current().name().unwrap_or("").to_string();
    ENDED.lock().push((name, ev as usize, status));
}

#[test]
fn end_callbacks_registered_by_the_thread_run_off_it() {
    let (fake, d, q) = setup();
    *fake.gate.lock() = true;
    let e = launch(d, q, SLOW_KERNEL, &[], true);
    // Registered by the thread once it has the driver's event; the fake
    // calls it at once, there.
    d.on_end(e, ended, std::ptr::null_mut())
        .expect("registered");
    let bad = launch(d, q, BAD_KERNEL, &[], true);
    d.on_end(bad, ended, std::ptr::null_mut())
        .expect("registered");
    *fake.gate.lock() = false;
    fake.opened.notify_all();
    d.finish(q).expect("nothing failed without an event");
    let since = std::time::Instant::now();
    while ENDED.lock().len() < 2 && since.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::yield_now();
    }
    let mut got = ENDED.lock().clone();
    got.sort();
    let mut want = vec![
        ("syrah-submit-calls".to_string(), e.0, COMPLETE),
        ("syrah-submit-calls".to_string(), bad.0, NOT_ENQUEUED),
    ];
    want.sort();
    assert_eq!(got, want);
}
