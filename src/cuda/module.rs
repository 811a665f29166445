//! A CUDA module made from OpenCL C's PTX (translated by `ptx`), and the
//! launch of its kernels with OpenCL's argument meaning: values, device
//! addresses, and group-local memory laid out in dynamic shared memory.

use super::loader::{check, Api, CUfunction, CUmodule, CUstream, CUDA_SUCCESS};
use super::ptx::{self, Entry, Param, Translated, OFFSET_BYTES};
use crate::core::error::{Error, Result, Status};
use smallvec::SmallVec;
use std::ffi::{c_void, CString};

// The hidden parameter is pushed as two words of two 32-bit values each.
const _: () = assert!(OFFSET_BYTES == 16);

/// A loaded module and its kernels' argument lists. The module is
/// unloaded when dropped; the context it was loaded in must then still
/// exist.
pub struct Module {
    api: &'static Api,
    raw: CUmodule,
    pub entries: Vec<Entry>,
}

// SAFETY: a CUDA module handle may be used from any thread whose current
// context is the module's; the table of entry points is immutable.
unsafe impl Send for Module {}
// SAFETY: as above; Module has no interior mutability.
unsafe impl Sync for Module {}

impl Module {
    /// Translates NVIDIA OpenCL's PTX `text` and loads it into the current
    /// context. A module the translation or the driver refuses is
    /// `Status::BuildFailure`, with the reason or the driver's log.
    pub fn load(api: &'static Api, text: &str) -> Result<Module> {
        let t = ptx::translate(text).map_err(|e| Error::new(Status::BuildFailure, e))?;
        Self::load_translated(api, t)
    }

    /// Loads translated PTX into the current context.
    pub fn load_translated(api: &'static Api, t: Translated) -> Result<Module> {
        let image = CString::new(t.ptx)
            .map_err(|_| Error::new(Status::BuildFailure, "the PTX holds a NUL byte"))?;
        let mut log = vec![0u8; 16 * 1024];
        let mut opts = [
            super::loader::CU_JIT_ERROR_LOG_BUFFER,
            super::loader::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut raw: CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX; the option arrays have
        // two entries each, the log buffer outlives the call and its size
        // is passed by value in the pointer slot, as the API defines.
        let rc = unsafe {
            (api.cuModuleLoadDataEx)(
                &mut raw,
                image.as_ptr() as *const c_void,
                2,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if rc != CUDA_SUCCESS {
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let why = check(api, rc, "cuModuleLoadDataEx")
                .err()
                .map(|e| e.message);
            return Err(Error::new(
                Status::BuildFailure,
                format!(
                    "{}: {}",
                    why.unwrap_or_default(),
                    String::from_utf8_lossy(&log[..end]).trim()
                ),
            ));
        }
        Ok(Module {
            api,
            raw,
            entries: t.entries,
        })
    }

    /// Kernel `name`, with its arguments.
    pub fn function(&self, name: &str) -> Result<Function> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
                Error::new(
                    Status::KernelNotFound,
                    format!(
                        "no kernel named '{name}' in the program (its kernels: {})",
                        names.join(", ")
                    ),
                )
            })?;
        let cname =
            CString::new(name).map_err(|_| Error::invalid("a kernel name holds a NUL byte"))?;
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded, `cname` is NUL-terminated and `f`
        // is a valid slot.
        let rc = unsafe { (self.api.cuModuleGetFunction)(&mut f, self.raw, cname.as_ptr()) };
        check(self.api, rc, "cuModuleGetFunction")?;
        Ok(Function {
            raw: f,
            entry: entry.clone(),
        })
    }
}

/// A kernel of a loaded module, valid while the module is loaded.
#[derive(Clone)]
pub struct Function {
    pub(crate) raw: CUfunction,
    pub entry: Entry,
}

// SAFETY: a CUDA function handle may be used from any thread whose
// current context is its module's.
unsafe impl Send for Function {}
// SAFETY: as above; nothing in it changes.
unsafe impl Sync for Function {}

impl Function {
    /// CUDA's attribute `attr` of the function (0 where it gives none).
    pub fn attribute(&self, api: &Api, attr: i32) -> i32 {
        let mut v = 0;
        // SAFETY: a function of a loaded module; `v` is a valid slot.
        let rc = unsafe { (api.cuFuncGetAttribute)(&mut v, attr, self.raw) };
        if rc == CUDA_SUCCESS {
            v
        } else {
            0
        }
    }
}

/// The stream a launch goes on: CUDA's null stream, or one the back end
/// made (and keeps until every command on it has been launched).
#[derive(Clone, Copy, Debug)]
pub struct LaunchStream(pub(crate) CUstream);

impl LaunchStream {
    /// The null stream of the current context.
    pub const NULL: LaunchStream = LaunchStream(std::ptr::null_mut());
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: the module was loaded and is unloaded once; a failure
        // leaves nothing to undo.
        unsafe { (self.api.cuModuleUnload)(self.raw) };
    }
}

/// One argument of a launch.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// Bytes by value.
    Bytes(&'a [u8]),
    /// A device address.
    Pointer(u64),
    /// This many bytes of group-local memory.
    Local(usize),
}

/// Refuses `n` arguments for a kernel taking another number.
fn takes(entry: &Entry, n: usize) -> Result<()> {
    if n != entry.params.len() {
        return Err(Error::new(
            Status::KernelArguments,
            format!(
                "kernel {} takes {} arguments, {n} were given",
                entry.name,
                entry.params.len(),
            ),
        ));
    }
    Ok(())
}

/// Checks argument `i` (`a`) against its parameter `p` of `entry`; places
/// group-local memory after the `*end` bytes placed so far and returns
/// its offset (0 for the other arguments).
fn place(entry: &Entry, i: usize, p: &Param, a: &Arg, end: &mut usize) -> Result<u64> {
    let wrong = |what: String| {
        Error::new(
            Status::KernelArguments,
            format!("kernel {} argument {i}: {what}", entry.name),
        )
    };
    match (p, a) {
        (Param::Value(n), Arg::Bytes(b)) if *n == b.len() => Ok(0),
        (Param::Value(n), Arg::Bytes(b)) => Err(wrong(format!(
            "takes {n} bytes by value, {} were given",
            b.len()
        ))),
        // PTX declares a pointer as a 64-bit value unless it marks it
        // `.ptr`: such a parameter takes a device address too.
        (Param::Pointer | Param::Value(8), Arg::Pointer(_)) => Ok(0),
        (Param::Local(align), Arg::Local(size)) if *size > 0 => {
            let at = end.next_multiple_of((*align).max(1));
            *end = at + size;
            Ok(at as u64)
        }
        (Param::Local(_), Arg::Local(_)) => Err(wrong("group-local memory of 0 bytes".into())),
        (p, a) => Err(wrong(format!("takes {p:?}, was given {a:?}"))),
    }
}

/// The shape of a launch: groups and work-items per group in each
/// dimension, the global offset (OpenCL's, in work-items) and how many
/// dimensions the range has (1 to 3).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub groups: [u32; 3],
    pub local: [u32; 3],
    pub offset: [u32; 3],
    pub dims: u32,
}

/// A launch's parameters as CUDA takes them, owned (a launch held on the
/// host keeps them): each parameter's value in 8-byte words (the bytes of
/// a value, a device address, a `__local` argument's offset in dynamic
/// shared memory), then the hidden offset and dimensions, and the dynamic
/// shared memory the `__local` arguments need.
#[derive(Clone)]
pub struct Params {
    words: SmallVec<[u64; 16]>,
    /// The word each parameter starts at, the hidden one last.
    at: SmallVec<[u32; 12]>,
    /// Bytes of dynamic shared memory.
    pub smem: u32,
}

impl Params {
    /// Checks `args` against `entry`'s parameters and lays them out.
    pub fn new(entry: &Entry, args: &[Arg], shape: &Shape) -> Result<Params> {
        Params::build(entry, args.len(), shape, |i| Ok(args[i]))
    }

    /// Checks `n` arguments against `entry`'s parameters and lays them
    /// out in one pass, `arg(i)` giving argument `i` (or the reason it
    /// cannot be given).
    pub fn build<'a>(
        entry: &Entry,
        n: usize,
        shape: &Shape,
        mut arg: impl FnMut(usize) -> Result<Arg<'a>>,
    ) -> Result<Params> {
        takes(entry, n)?;
        // Inline for the usual few arguments; grown past that.
        let mut words: SmallVec<[u64; 16]> = SmallVec::new();
        let mut at = SmallVec::new();
        let mut end = 0usize;
        for (i, p) in entry.params.iter().enumerate() {
            let a = arg(i)?;
            let off = place(entry, i, p, &a, &mut end)?;
            at.push(words.len() as u32);
            match a {
                Arg::Bytes(b) => push_bytes(&mut words, b),
                Arg::Pointer(p) => words.push(p),
                Arg::Local(_) => words.push(off),
            }
        }
        let smem = u32::try_from(end).map_err(|_| {
            Error::new(
                Status::OutOfLocalMemory,
                format!("{end} bytes of group-local memory"),
            )
        })?;
        at.push(words.len() as u32);
        // The hidden offset and dimension count: four 32-bit values, two
        // words.
        let pair = |a: u32, b: u32| {
            let mut w = [0u8; 8];
            w[..4].copy_from_slice(&a.to_ne_bytes());
            w[4..].copy_from_slice(&b.to_ne_bytes());
            u64::from_ne_bytes(w)
        };
        let [ox, oy, oz] = shape.offset;
        words.push(pair(ox, oy));
        words.push(pair(oz, shape.dims));
        Ok(Params { words, at, smem })
    }

    /// The pointer list, valid while `self` is neither moved nor dropped.
    pub fn slots(&self) -> SmallVec<[*mut c_void; 12]> {
        let base = self.words.as_ptr() as *mut u64;
        // Within `words`: each index was its length when a word was pushed.
        let slot = |i: u32| base.wrapping_add(i as usize).cast::<c_void>();
        let mut buf = [std::ptr::null_mut(); 12];
        if self.at.len() > buf.len() {
            return self.at.iter().map(|&i| slot(i)).collect();
        }
        for (b, &i) in buf.iter_mut().zip(&self.at) {
            *b = slot(i);
        }
        SmallVec::from_buf_and_len(buf, self.at.len())
    }
}

/// Appends `b` to `words` in the words' own byte order, the last word
/// padded with zeros.
fn push_bytes(words: &mut SmallVec<[u64; 16]>, b: &[u8]) {
    for c in b.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        words.push(u64::from_ne_bytes(w));
    }
}

/// Allows `f` `smem` bytes of dynamic shared memory where that is above
/// CUDA's default, in the current context.
pub fn allow_smem(api: &Api, f: &Function, smem: u32) -> Result<()> {
    if smem <= 48 * 1024 {
        return Ok(());
    }
    // SAFETY: `f` is a function of a loaded module; the attribute takes a
    // byte count.
    let rc = unsafe {
        (api.cuFuncSetAttribute)(
            f.raw,
            super::loader::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
    };
    check(api, rc, "cuFuncSetAttribute")
        .map_err(|e| Error::new(Status::OutOfLocalMemory, e.message))
}

/// Launches `f` with `params` on `stream`, in the current context.
pub fn launch(
    api: &Api,
    f: &Function,
    params: &Params,
    shape: Shape,
    stream: LaunchStream,
) -> Result<()> {
    allow_smem(api, f, params.smem)?;
    let mut slots = params.slots();
    let [gx, gy, gz] = shape.groups;
    let [bx, by, bz] = shape.local;
    // SAFETY: `slots` holds one pointer per parameter of `f` (the
    // arguments, then the hidden offset), each to a value of the size the
    // kernel declares (checked by `local_layout`), all alive until the
    // call returns, which copies them.
    let rc = unsafe {
        (api.cuLaunchKernel)(
            f.raw,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            params.smem,
            stream.0,
            slots.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    check(api, rc, "cuLaunchKernel")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            name: "k".into(),
            params: vec![
                Param::Pointer,
                Param::Local(4),
                Param::Value(4),
                Param::Local(8),
            ],
        }
    }

    /// Arguments for `entry()`: a pointer, two local sizes around `four`.
    fn args(four: &[u8; 4]) -> [Arg<'_>; 4] {
        [
            Arg::Pointer(0x1000),
            Arg::Local(10),
            Arg::Bytes(four),
            Arg::Local(16),
        ]
    }

    fn shape() -> Shape {
        Shape {
            groups: [1; 3],
            local: [1; 3],
            offset: [5, 6, 7],
            dims: 2,
        }
    }

    /// The first word each argument's slot points at (a `__local`
    /// argument's offset), and the dynamic shared memory, of a launch of
    /// `entry` with `args`.
    fn laid_out(entry: &Entry, args: &[Arg]) -> std::result::Result<(Vec<u64>, u32), String> {
        let p = Params::new(entry, args, &shape()).map_err(|e| e.message)?;
        let slots = p.slots();
        let words = slots[..args.len()]
            .iter()
            // SAFETY: each slot points into `p`'s words, alive and unmoved.
            .map(|&s| unsafe { *(s as *const u64) })
            .collect();
        Ok((words, p.smem))
    }

    #[test]
    fn locals_are_laid_out_aligned_in_order() {
        let four = 7u32.to_ne_bytes();
        // The locals at offsets 0 and 16 (aligned to 8), 32 bytes in all.
        assert_eq!(
            laid_out(&entry(), &args(&four)),
            Ok((vec![0x1000, 0, 7, 16], 32))
        );
    }

    #[test]
    fn wrong_arguments_are_named() {
        let four = 7u32.to_ne_bytes();
        let msg = |args: &[Arg]| {
            Params::new(&entry(), args, &shape())
                .err()
                .map(|e| (e.status, e.message))
        };
        assert_eq!(
            msg(&[Arg::Pointer(1)]),
            Some((
                Status::KernelArguments,
                "kernel k takes 4 arguments, 1 were given".into()
            ))
        );
        assert_eq!(
            msg(&[
                Arg::Pointer(1),
                Arg::Local(4),
                Arg::Bytes(&four[..2]),
                Arg::Local(8)
            ]),
            Some((
                Status::KernelArguments,
                "kernel k argument 2: takes 4 bytes by value, 2 were given".into()
            ))
        );
        assert_eq!(
            msg(&[
                Arg::Pointer(1),
                Arg::Local(0),
                Arg::Bytes(&four),
                Arg::Local(8)
            ]),
            Some((
                Status::KernelArguments,
                "kernel k argument 1: group-local memory of 0 bytes".into()
            ))
        );
        assert_eq!(
            msg(&[
                Arg::Local(4),
                Arg::Local(4),
                Arg::Bytes(&four),
                Arg::Local(8)
            ]),
            Some((
                Status::KernelArguments,
                "kernel k argument 0: takes Pointer, was given Local(4)".into()
            ))
        );
    }

    #[test]
    fn params_point_at_each_value_then_the_hidden_offset() {
        let four = 7u32.to_ne_bytes();
        let args = args(&four);
        let p = Params::new(&entry(), &args, &shape()).map_err(|e| e.message);
        let Ok(p) = p else {
            panic!("refused: {p:?}", p = p.err());
        };
        assert_eq!(p.smem, 32);
        let slots = p.slots();
        assert_eq!(slots.len(), 5);
        // SAFETY: each slot points into `p`'s words, alive and unmoved.
        let word = |i: usize| unsafe { *(slots[i] as *const u64) };
        assert_eq!(word(0), 0x1000);
        assert_eq!(word(1), 0);
        // SAFETY: as above; four bytes were written there.
        assert_eq!(unsafe { *(slots[2] as *const u32) }, 7);
        assert_eq!(word(3), 16);
        // SAFETY: the hidden parameter's 16 bytes follow in two words.
        let hidden = unsafe { std::slice::from_raw_parts(slots[4] as *const u32, 4) };
        assert_eq!(hidden, &[5, 6, 7, 2]);
    }

    #[test]
    fn a_64_bit_value_parameter_takes_a_device_address() {
        // `.param .u64 p` in PTX given directly: a pointer without `.ptr`.
        let e = Entry {
            name: "k".into(),
            params: vec![Param::Value(8), Param::Value(4)],
        };
        let four = 7u32.to_ne_bytes();
        let got = laid_out(&e, &[Arg::Pointer(0x1000), Arg::Bytes(&four)]);
        assert_eq!(got, Ok((vec![0x1000, 7], 0)));
        let narrow = Params::new(&e, &[Arg::Pointer(0x1000), Arg::Pointer(0x2000)], &shape());
        assert_eq!(
            narrow.err().map(|e| e.message),
            Some("kernel k argument 1: takes Value(4), was given Pointer(8192)".into())
        );
    }
}
