//! Reads into the host that the caller waits for at once, made one
//! blocking call: NVIDIA's OpenCL completes a read into ordinary memory
//! that was enqueued without blocking microseconds to tens of them after
//! a blocking read would have returned, however it is waited for (an
//! event wait, `clFinish` or status questions alike; `bench_driver`).
//! The read goes on a queue of the context's own, outside the queues'
//! locks, so that commands other threads submit meanwhile do not wait
//! for it; it waits for what it depends on through its wait list.

use crate::backend::{EventH, MemH, QueueH, Side};
use crate::core::error::Result;
use crate::runtime::context::Context;
use crate::runtime::event::Event;
use crate::runtime::platform::Device;
use crate::runtime::queue::Queue;
use smallvec::SmallVec;
use std::sync::Arc;

impl Context {
    /// The context's queue for blocking reads on `device`, made at first
    /// use and kept until the context goes.
    fn reader(&self, device: &'static Device) -> Result<QueueH> {
        let mut readers = self.readers.lock();
        if let Some(&(_, q)) = readers.iter().find(|(d, _)| std::ptr::eq(*d, device)) {
            return Ok(q);
        }
        let q = self
            .platform
            .driver
            .create_queue(self.handle(), device.handle(), false)?;
        readers.push((device, q));
        Ok(q)
    }
}

impl Queue {
    /// A copy of `len` bytes from byte `off` of memory object `src` (of
    /// this queue's device) into host memory at `dst`, for a caller that
    /// waits for it at once, made as one blocking read after `deps`: the
    /// finished copy's event. None where it is left to the queue as any
    /// copy (the device's reads are not made blocking, the trace records
    /// the commands, or a dependency may take indefinitely or belongs to
    /// another context), and where the read failed because a dependency
    /// did, so that the queue's copy reports that failure as it would
    /// have.
    ///
    /// # Safety
    /// `dst` must hold `len` writable bytes, and `src` hold the copied
    /// bytes.
    pub(crate) unsafe fn read_home_now(
        &self,
        dst: usize,
        src: MemH,
        off: usize,
        len: usize,
        deps: &[Arc<Event>],
    ) -> Result<Option<Arc<Event>>> {
        if !self.device.reads_home_blocking
            || crate::runtime::trace::tracer().is_some()
            || deps.iter().any(|d| d.ctx_id != self.ctx.id || d.blocks())
        {
            return Ok(None);
        }
        let wl: SmallVec<[EventH; 8]> = deps
            .iter()
            .filter(|d| !d.known_ok())
            .map(|d| d.handle)
            .collect();
        let q = self.ctx.reader(self.device)?;
        let mut handle = EventH::NONE;
        let read = self.driver().enqueue_copy(
            q,
            Side { mem: None, at: dst },
            Side {
                mem: Some(src),
                at: off,
            },
            len,
            true,
            &wl,
            Some(&mut handle),
        );
        if let Err(e) = read {
            let failed_dep = deps.iter().any(|d| matches!(d.outcome(), Ok(Some(Err(_)))));
            return if failed_dep { Ok(None) } else { Err(e) };
        }
        let ev = Event::new(
            handle,
            self.driver(),
            self.ctx.id,
            format!("buffer copy of {len} bytes").into(),
            false,
            deps.iter()
                .filter(|d| d.passes_failure_on())
                .cloned()
                .collect(),
            self.me.clone(),
        );
        // The blocking read has returned: the copy is done.
        ev.mark_completed();
        Ok(Some(ev.with_bytes(len)))
    }
}
