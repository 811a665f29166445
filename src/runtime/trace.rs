//! `SYRAH_TRACE=file.json`: a Chrome/Perfetto trace of every command, one
//! timeline process per device with a thread per lane, from OpenCL
//! profiling timestamps (host tasks from the host clock).
//! `SYRAH_DAG=file.dot`: the dependency graph of every command.
//!
//! Both files are valid after every flush: records are appended in front
//! of the closing text, which is written again each time. They are
//! flushed when a queue finishes or is released, and whenever enough
//! records are pending.

use super::event::Event;
use super::platform::Device;
use crate::backend::{Driver, EventH, Stamp};
use crate::core::trace::{self as text, Span};
use crate::opencl::driver::{event_h, OPENCL};
use crate::opencl::ffi::*;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Pending text at which a sink writes without being asked.
const FLUSH_AT: usize = 1 << 16;

struct Sink {
    /// The variable that named the file.
    var: &'static str,
    path: String,
    file: Option<File>,
    /// Text between records.
    sep: &'static str,
    /// Text that ends the file.
    close: &'static str,
    pending: String,
    /// Records written so far.
    written: u64,
}

impl Sink {
    fn create(
        var: &'static str,
        open: &str,
        sep: &'static str,
        close: &'static str,
    ) -> Option<Self> {
        let path = std::env::var(var).ok().filter(|p| !p.is_empty())?;
        let mut sink = Sink {
            var,
            path,
            file: None,
            sep,
            close,
            pending: String::new(),
            written: 0,
        };
        match File::create(&sink.path) {
            Ok(mut f) => match f
                .write_all(open.as_bytes())
                .and(f.write_all(close.as_bytes()))
            {
                Ok(()) => sink.file = Some(f),
                Err(e) => sink.give_up(&e),
            },
            Err(e) => sink.give_up(&e),
        }
        Some(sink)
    }

    fn give_up(&mut self, e: &std::io::Error) {
        eprintln!(
            "syrah: {}: cannot write '{}': {e}; nothing more is written there",
            self.var, self.path
        );
        self.file = None;
    }

    fn push(&mut self, record: &str) {
        if self.file.is_none() {
            return;
        }
        if self.written > 0 || !self.pending.is_empty() {
            self.pending.push_str(self.sep);
        }
        self.pending.push_str(record);
        self.written += 1;
        if self.pending.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes pending records over the closing text, then the closing text.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let Some(f) = self.file.as_mut() else { return };
        let back = -(self.close.len() as i64);
        let r = f
            .seek(SeekFrom::End(back))
            .and_then(|_| f.write_all(self.pending.as_bytes()))
            .and_then(|_| f.write_all(self.close.as_bytes()))
            .and_then(|_| f.flush());
        self.pending.clear();
        if let Err(e) = r {
            self.give_up(&e);
        }
    }
}

struct TraceState {
    sink: Sink,
    /// Host time minus device time, per device, from its first command.
    offsets: HashMap<usize, i128>,
    named: HashSet<(u64, u64)>,
}

pub struct Tracer {
    epoch: Instant,
    trace: Option<Mutex<TraceState>>,
    dag: Option<Mutex<Sink>>,
}

static TRACER: OnceLock<Option<Tracer>> = OnceLock::new();

/// The tracer, when `SYRAH_TRACE` or `SYRAH_DAG` names a file.
pub fn tracer() -> Option<&'static Tracer> {
    TRACER
        .get_or_init(|| {
            let trace = Sink::create("SYRAH_TRACE", "[\n", ",\n", "\n]\n");
            let dag = Sink::create(
                "SYRAH_DAG",
                "digraph syrah {\n  rankdir=LR;\n  node [fontsize=10];\n",
                "\n",
                "\n}\n",
            );
            if trace.is_none() && dag.is_none() {
                return None;
            }
            Some(Tracer {
                epoch: Instant::now(),
                trace: trace.map(|sink| {
                    Mutex::new(TraceState {
                        sink,
                        offsets: HashMap::new(),
                        named: HashSet::new(),
                    })
                }),
                dag: dag.map(Mutex::new),
            })
        })
        .as_ref()
}

/// True when commands need profiling timestamps for the trace.
pub fn timing() -> bool {
    tracer().is_some_and(|t| t.trace.is_some())
}

/// A finished command of a device, as the trace records it.
struct DeviceCommand<'a> {
    event: EventH,
    driver: &'static dyn Driver,
    /// When it was enqueued ([`Tracer::now_ns`]).
    submitted: u64,
    tid: u64,
    id: u64,
    what: &'a str,
    category: &'static str,
    bytes: u64,
    failed: bool,
}

/// Timeline process of a device, and of host tasks.
fn device_pid(d: &Device) -> u64 {
    (d.platform_index as u64 + 1) * 1000 + d.index as u64
}
const HOST_PID: u64 = 1;

fn device_key(d: &Device) -> usize {
    d as *const Device as usize
}

thread_local! {
    static WORKER: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

impl Tracer {
    /// Nanoseconds since the trace began.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn name(st: &mut TraceState, pid: u64, tid: Option<u64>, name: impl FnOnce() -> String) {
        if st.named.insert((pid, tid.unwrap_or(u64::MAX))) {
            let line = text::name_json(pid, tid, &name());
            st.sink.push(&line);
        }
    }

    /// Records a command of `device` that has finished.
    pub fn command_done(&self, ev: &Event, device: &'static Device) {
        let lane = ev.lane.load(Ordering::Acquire);
        self.device_command(
            &DeviceCommand {
                event: ev.handle,
                driver: ev.driver,
                submitted: ev.submit_ns.load(Ordering::Acquire),
                tid: lane,
                id: ev.id,
                what: &ev.what,
                category: text::category(&ev.what),
                bytes: ev.bytes.load(Ordering::Acquire),
                failed: !ev.is_settled_ok(),
            },
            device,
            || format!("lane {lane}"),
        );
    }

    /// Records a device copy that a staged copy (or a timed direct one),
    /// the command `of`, made on the device's staging queue `tid`: it was
    /// enqueued at `submitted` ([`Tracer::now_ns`]) and has finished.
    #[allow(clippy::too_many_arguments)]
    pub fn staging_done(
        &self,
        cl: cl_event,
        submitted: u64,
        device: &'static Device,
        tid: u64,
        of: u64,
        what: &str,
        bytes: usize,
        failed: bool,
    ) {
        self.device_command(
            &DeviceCommand {
                event: event_h(cl),
                driver: &OPENCL,
                submitted,
                tid,
                id: of,
                what,
                category: "staging",
                bytes: bytes as u64,
                failed,
            },
            device,
            || "staging".to_string(),
        );
    }

    /// Records a finished command on `device`'s timeline, placed by its
    /// profiling timestamps.
    fn device_command(
        &self,
        c: &DeviceCommand<'_>,
        device: &'static Device,
        tid_name: impl FnOnce() -> String,
    ) {
        let Some(st) = &self.trace else { return };
        let ts = |p| c.driver.timestamp(c.event, p).ok();
        let times = match (ts(Stamp::Queued), ts(Stamp::Started), ts(Stamp::Ended)) {
            (Some(q), Some(s), Some(e)) => Some((q, s, e)),
            _ => None,
        };
        let pid = device_pid(device);
        let mut st = st.lock();
        let (start_ns, dur_ns) = match times {
            Some((q, s, e)) => {
                let off = *st
                    .offsets
                    .entry(device_key(device))
                    .or_insert(c.submitted as i128 - q as i128);
                let start = (s as i128 + off).max(0) as u64;
                (start, e.saturating_sub(s))
            }
            // Failed commands have no timestamps: a mark where submitted.
            None => (c.submitted, 0),
        };
        Self::name(&mut st, pid, None, || format!("device {}", device.label()));
        Self::name(&mut st, pid, Some(c.tid), tid_name);
        let span = Span {
            id: c.id,
            name: c.what.to_string(),
            category: c.category,
            pid,
            tid: c.tid,
            start_ns,
            dur_ns,
            bytes: (c.bytes > 0).then_some(c.bytes),
            failed: c.failed,
        };
        st.sink.push(&text::span_json(&span));
    }

    /// Records host work that ran from `start_ns` until now on this thread.
    pub fn host_done(&self, ev: &Event, start_ns: u64, failed: bool) {
        let Some(st) = &self.trace else { return };
        let end = self.now_ns();
        let tid = WORKER.with(|w| *w);
        let bytes = ev.bytes.load(Ordering::Acquire);
        let mut st = st.lock();
        Self::name(&mut st, HOST_PID, None, || "host tasks".into());
        Self::name(&mut st, HOST_PID, Some(tid), || format!("worker {tid}"));
        let span = Span {
            id: ev.id,
            name: ev.what.to_string(),
            category: text::category(&ev.what),
            pid: HOST_PID,
            tid,
            start_ns,
            dur_ns: end.saturating_sub(start_ns),
            // Host jobs that copy (staged copies) carry their bytes.
            bytes: (bytes > 0).then_some(bytes),
            failed,
        };
        st.sink.push(&text::span_json(&span));
    }

    /// True when the dependency graph is written.
    pub fn graphing(&self) -> bool {
        self.dag.is_some()
    }

    /// Records a command of `device` and the commands it waits for (by id)
    /// in the graph.
    pub fn submitted(&self, ev: &Event, device: &Device, deps: &[u64]) {
        let place = format!("device {}.{}", device.platform_index, device.index);
        self.graph_node(ev, &place, deps);
    }

    /// Records a node placed at `place` and its incoming edges.
    pub fn graph_node(&self, ev: &Event, place: &str, deps: &[u64]) {
        let Some(d) = &self.dag else { return };
        let mut d = d.lock();
        d.push(&text::dot_node(ev.id, &ev.what, place));
        for &dep in deps {
            d.push(&text::dot_edge(dep, ev.id));
        }
    }

    /// Writes what is pending to both files.
    pub fn flush(&self) {
        if let Some(st) = &self.trace {
            st.lock().sink.flush();
        }
        if let Some(d) = &self.dag {
            d.lock().flush();
        }
    }
}
