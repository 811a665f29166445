//! OpenCL C kernels run through the CUDA back end's kernel route: NVIDIA's
//! OpenCL compiles them to PTX, `cuda::ptx` makes that PTX loadable by
//! CUDA, and each kernel runs through `cuLaunchKernel` with exact checks
//! of what it wrote (work-item ids with a global offset in three
//! dimensions, group-local arguments beside static group-local arrays,
//! structures and scalars by value, constant memory, atomics, maths).
//!
//! Needs an NVIDIA GPU with both its OpenCL and CUDA drivers; elsewhere it
//! prints why it skipped.

use syrah::cuda::loader::{self, Api, CUdeviceptr};
use syrah::cuda::module::{launch, Arg, LaunchStream, Module, Params, Shape};
use syrah::runtime::build_cache::ProgramKind;
use syrah::runtime::context::Context;
use syrah::runtime::platform::{runtime, Device};
use syrah::runtime::program::Program;

const SOURCE: &str = r#"
typedef struct { int a; float b; double c; char d; } S;
__kernel void ids(__global int *out) {
  size_t x = get_global_id(0) - get_global_offset(0);
  size_t y = get_global_id(1) - get_global_offset(1);
  size_t z = get_global_id(2) - get_global_offset(2);
  size_t i = ((z * get_global_size(1) + y) * get_global_size(0) + x) * 8;
  out[i + 0] = (int)get_global_id(0);
  out[i + 1] = (int)get_global_id(1);
  out[i + 2] = (int)get_global_id(2);
  out[i + 3] = (int)(get_group_id(0) + 10 * get_group_id(1) + 100 * get_group_id(2));
  out[i + 4] = (int)(get_local_id(0) + 10 * get_local_id(1) + 100 * get_local_id(2));
  out[i + 5] = (int)(get_num_groups(0) + 10 * get_num_groups(1) + 100 * get_num_groups(2));
  out[i + 6] = (int)(get_local_size(0) + 10 * get_local_size(1) + 100 * get_local_size(2));
  out[i + 7] = (int)(get_global_size(0) + 100 * get_global_size(1) + 10000 * get_global_size(2));
}
__kernel void dims(__global int *out) { out[get_global_id(0)] = (int)get_work_dim(); }
__kernel void locals(__global const int *in, __global long *out, __local int *a, __local long *b) {
  size_t l = get_local_id(0), n = get_local_size(0);
  a[l] = in[get_global_id(0)];
  b[l] = 2 * (long)in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l == 0) {
    long s = 0;
    for (size_t k = 0; k < n; k++) s += a[k] + b[n - 1 - k];
    out[get_group_id(0)] = s;
  }
}
__kernel void mixed(__global int *out, __local int *d) {
  __local int s[32];
  size_t l = get_local_id(0);
  s[l] = (int)l;
  d[l] = 100 * (int)l;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = s[31 - l] + d[31 - l];
}
__kernel void byval(__global double *out, S s, char c, short h, long q, float2 v) {
  out[0] = s.a + s.b + s.c + s.d + c + h + q + v.x + v.y;
}
__kernel void cst(__global float *out, __constant float *table, int n) {
  size_t i = get_global_id(0);
  out[i] = table[i % n] * 2.0f;
}
__kernel void misc(__global int *count, __global float *f, __global double *d) {
  size_t i = get_global_id(0);
  atomic_add(count, (int)i);
  f[i] = exp(0.001f * i) + sin(0.01f * i);
  d[i] = sqrt((double)i) * 0.5;
}
"#;

#[repr(C)]
struct S {
    a: i32,
    b: f32,
    c: f64,
    d: i8,
}

/// Device memory holding `bytes`, freed on drop.
struct Mem {
    api: &'static Api,
    ptr: CUdeviceptr,
    len: usize,
}

impl Mem {
    fn new(api: &'static Api, bytes: &[u8]) -> Result<Mem, String> {
        let mut ptr = 0;
        // SAFETY: `ptr` is a valid slot; a context is current.
        let rc = unsafe { (api.cuMemAlloc)(&mut ptr, bytes.len().max(1)) };
        loader::check(api, rc, "cuMemAlloc").map_err(|e| e.message)?;
        let m = Mem {
            api,
            ptr,
            len: bytes.len(),
        };
        // SAFETY: `ptr` holds `len` bytes and `bytes` is that long.
        let rc = unsafe { (api.cuMemcpyHtoD)(ptr, bytes.as_ptr().cast(), bytes.len()) };
        loader::check(api, rc, "cuMemcpyHtoD").map_err(|e| e.message)?;
        Ok(m)
    }

    fn read(&self) -> Result<Vec<u8>, String> {
        let mut out = vec![0u8; self.len];
        // SAFETY: `out` and the allocation both hold `len` bytes; the
        // copy is synchronous and follows the launches on the null stream.
        let rc = unsafe { (self.api.cuMemcpyDtoH)(out.as_mut_ptr().cast(), self.ptr, self.len) };
        loader::check(self.api, rc, "cuMemcpyDtoH").map_err(|e| e.message)?;
        Ok(out)
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc and freed once.
        unsafe { (self.api.cuMemFree)(self.ptr) };
    }
}

fn ints(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: reading the plain-data values of `v` as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        .to_vec()
}

fn shape(groups: [u32; 3], local: [u32; 3], offset: [u32; 3]) -> Shape {
    let dims = if groups[2] * local[2] > 1 {
        3
    } else if groups[1] * local[1] > 1 {
        2
    } else {
        1
    };
    Shape {
        groups,
        local,
        offset,
        dims,
    }
}

fn run(api: &'static Api, m: &Module, name: &str, args: &[Arg], s: Shape) -> Result<(), String> {
    let f = m.function(name).map_err(|e| e.message)?;
    let params = Params::new(&f.entry, args, &s).map_err(|e| e.message)?;
    launch(api, &f, &params, s, LaunchStream::NULL).map_err(|e| e.message)?;
    // SAFETY: a context is current.
    let rc = unsafe { (api.cuCtxSynchronize)() };
    loader::check(api, rc, name).map_err(|e| e.message)
}

fn case_ids(api: &'static Api, m: &Module) -> Result<(), String> {
    let (g, l, o) = ([2u32, 2, 2], [4u32, 2, 1], [3u32, 5, 7]);
    let n = 8 * 4 * 2;
    let out = Mem::new(api, &vec![0u8; n * 8 * 4])?;
    run(api, m, "ids", &[Arg::Pointer(out.ptr)], shape(g, l, o))?;
    let got = ints(&out.read()?);
    for z in 0..2 {
        for y in 0..4 {
            for x in 0..8 {
                let i = ((z * 4 + y) * 8 + x) * 8;
                let want = [
                    x as i32 + 3,
                    y as i32 + 5,
                    z as i32 + 7,
                    (x / 4 + 10 * (y / 2) + 100 * z) as i32,
                    (x % 4 + 10 * (y % 2)) as i32,
                    2 + 20 + 200,
                    4 + 20 + 100,
                    8 + 400 + 20000,
                ];
                if got[i..i + 8] != want {
                    return Err(format!(
                        "work-item ({x},{y},{z}): {:?}, expected {want:?}",
                        &got[i..i + 8]
                    ));
                }
            }
        }
    }
    Ok(())
}

fn case_dims(api: &'static Api, m: &Module) -> Result<(), String> {
    let out = Mem::new(api, &[0u8; 16])?;
    run(
        api,
        m,
        "dims",
        &[Arg::Pointer(out.ptr)],
        shape([1, 1, 1], [4, 1, 1], [0; 3]),
    )?;
    let got = ints(&out.read()?);
    (got == [1, 1, 1, 1])
        .then_some(())
        .ok_or(format!("work dimensions {got:?}, expected 1s"))
}

fn case_locals(api: &'static Api, m: &Module) -> Result<(), String> {
    let input: Vec<i32> = (0..256).map(|i| i * 7 - 300).collect();
    let inp = Mem::new(api, &bytes_of(&input))?;
    let out = Mem::new(api, &[0u8; 4 * 8])?;
    let args = [
        Arg::Pointer(inp.ptr),
        Arg::Pointer(out.ptr),
        Arg::Local(64 * 4),
        Arg::Local(64 * 8),
    ];
    run(
        api,
        m,
        "locals",
        &args,
        shape([4, 1, 1], [64, 1, 1], [0; 3]),
    )?;
    let b = out.read()?;
    let got: Vec<i64> = b
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let want: Vec<i64> = (0..4)
        .map(|g| {
            3 * input[g * 64..g * 64 + 64]
                .iter()
                .map(|v| *v as i64)
                .sum::<i64>()
        })
        .collect();
    (got == want)
        .then_some(())
        .ok_or(format!("group sums {got:?}, expected {want:?}"))
}

fn case_mixed(api: &'static Api, m: &Module) -> Result<(), String> {
    let out = Mem::new(api, &[0u8; 64 * 4])?;
    run(
        api,
        m,
        "mixed",
        &[Arg::Pointer(out.ptr), Arg::Local(32 * 4)],
        shape([2, 1, 1], [32, 1, 1], [0; 3]),
    )?;
    let got = ints(&out.read()?);
    let want: Vec<i32> = (0..64).map(|i| 101 * (31 - i % 32)).collect();
    (got == want).then_some(()).ok_or(format!(
        "static and argument locals {got:?}, expected {want:?}"
    ))
}

fn case_byval(api: &'static Api, m: &Module) -> Result<(), String> {
    let out = Mem::new(api, &[0u8; 8])?;
    let s = S {
        a: 1,
        b: 0.5,
        c: 0.25,
        d: 2,
    };
    // SAFETY: reading the plain-data structure as bytes.
    let sb = unsafe {
        std::slice::from_raw_parts((&s as *const S).cast::<u8>(), std::mem::size_of::<S>())
    };
    let (c, h, q, v) = (3i8, 400i16, 5_000_000_000i64, [0.125f32, 8.0]);
    let vb = bytes_of(&v);
    let args = [
        Arg::Pointer(out.ptr),
        Arg::Bytes(sb),
        Arg::Bytes(&c.to_ne_bytes()),
        Arg::Bytes(&h.to_ne_bytes()),
        Arg::Bytes(&q.to_ne_bytes()),
        Arg::Bytes(&vb),
    ];
    run(api, m, "byval", &args, shape([1, 1, 1], [1, 1, 1], [0; 3]))?;
    let b = out.read()?;
    let got = f64::from_ne_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let want = 1.0 + 0.5 + 0.25 + 2.0 + 3.0 + 400.0 + 5e9 + 0.125 + 8.0;
    (got == want)
        .then_some(())
        .ok_or(format!("sum of values {got}, expected {want}"))
}

fn case_cst(api: &'static Api, m: &Module) -> Result<(), String> {
    let table = [1.5f32, -2.0, 3.25];
    let t = Mem::new(api, &bytes_of(&table))?;
    let out = Mem::new(api, &[0u8; 32 * 4])?;
    let n = 3i32.to_ne_bytes();
    run(
        api,
        m,
        "cst",
        &[Arg::Pointer(out.ptr), Arg::Pointer(t.ptr), Arg::Bytes(&n)],
        shape([1, 1, 1], [32, 1, 1], [0; 3]),
    )?;
    let got: Vec<f32> = ints(&out.read()?)
        .into_iter()
        .map(|i| f32::from_bits(i as u32))
        .collect();
    let want: Vec<f32> = (0..32).map(|i| table[i % 3] * 2.0).collect();
    (got == want)
        .then_some(())
        .ok_or(format!("constant table {got:?}, expected {want:?}"))
}

fn case_misc(api: &'static Api, m: &Module) -> Result<(), String> {
    let count = Mem::new(api, &[0u8; 4])?;
    let f = Mem::new(api, &[0u8; 1024 * 4])?;
    let d = Mem::new(api, &[0u8; 1024 * 8])?;
    run(
        api,
        m,
        "misc",
        &[
            Arg::Pointer(count.ptr),
            Arg::Pointer(f.ptr),
            Arg::Pointer(d.ptr),
        ],
        shape([8, 1, 1], [128, 1, 1], [0; 3]),
    )?;
    let c = ints(&count.read()?)[0];
    if c != (0..1024).sum::<i32>() {
        return Err(format!(
            "atomic sum {c}, expected {}",
            (0..1024).sum::<i32>()
        ));
    }
    let fv: Vec<f32> = ints(&f.read()?)
        .into_iter()
        .map(|i| f32::from_bits(i as u32))
        .collect();
    for (i, v) in fv.iter().enumerate() {
        let want = (0.001f32 * i as f32).exp() + (0.01f32 * i as f32).sin();
        if (v - want).abs() > 4e-6 * want.abs().max(1.0) {
            return Err(format!("exp + sin at {i}: {v}, expected {want}"));
        }
    }
    let db = d.read()?;
    for i in 0..1024 {
        let v = f64::from_ne_bytes(db[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        if v != (i as f64).sqrt() * 0.5 {
            return Err(format!(
                "sqrt at {i}: {v}, expected {}",
                (i as f64).sqrt() * 0.5
            ));
        }
    }
    Ok(())
}

/// Says on standard error, past the test harness's capture, that the test
/// skipped and why.
fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIP opencl_c_kernels_run_through_cuda: {why}"
    );
}

/// One kernel's run and check.
type Case = fn(&'static Api, &Module) -> Result<(), String>;

fn nvidia_device() -> Option<&'static Device> {
    runtime()
        .ok()?
        .devices()
        .find(|d| d.vendor.contains("NVIDIA"))
}

#[test]
fn opencl_c_kernels_run_through_cuda() {
    let api = match loader::api() {
        Ok(a) => a,
        Err(e) => return skipped(&format!("no CUDA driver: {}", e.message)),
    };
    let Some(dev) = nvidia_device() else {
        return skipped("no NVIDIA device on an OpenCL platform, whose compiler makes the PTX");
    };
    let ctx = Context::create(&[dev])
        .map_err(|e| e.message)
        .expect("an OpenCL context on the NVIDIA device");
    let prog = Program::build(&ctx, ProgramKind::Source, SOURCE.as_bytes(), "", &[])
        .map_err(|e| e.message)
        .expect("the kernels build with NVIDIA's OpenCL");
    let ptx = prog
        .binary(dev)
        .map_err(|e| e.message)
        .expect("the program's PTX");
    let text = String::from_utf8_lossy(&ptx)
        .trim_end_matches('\0')
        .to_string();
    if let Ok(dir) = std::env::var("SYRAH_PTX_DUMP") {
        let _ = std::fs::write(format!("{dir}/cuda_kernels.ptx"), &text);
    }
    let mut ctxp: loader::CUcontext = std::ptr::null_mut();
    // SAFETY: `ctxp` is a valid slot; device 0 exists where a CUDA driver
    // loaded and an NVIDIA device was found.
    let rc = unsafe { (api.cuDevicePrimaryCtxRetain)(&mut ctxp, 0) };
    loader::check(api, rc, "cuDevicePrimaryCtxRetain")
        .map_err(|e| e.message)
        .expect("a CUDA context");
    // SAFETY: the primary context was retained above.
    let rc = unsafe { (api.cuCtxSetCurrent)(ctxp) };
    loader::check(api, rc, "cuCtxSetCurrent")
        .map_err(|e| e.message)
        .expect("the context made current");
    let m = Module::load(api, &text)
        .map_err(|e| e.message)
        .expect("the translated PTX loads");
    let cases: [(&str, Case); 7] = [
        ("ids", case_ids),
        ("dims", case_dims),
        ("locals", case_locals),
        ("mixed", case_mixed),
        ("byval", case_byval),
        ("cst", case_cst),
        ("misc", case_misc),
    ];
    let mut failed = Vec::new();
    for (name, case) in cases {
        match case(api, &m) {
            Ok(()) => println!("cuda kernel {name}: ok"),
            Err(e) => {
                println!("cuda kernel {name}: FAILED: {e}");
                failed.push(name);
            }
        }
    }
    drop(m);
    // SAFETY: releases the reference retained above.
    unsafe { (api.cuDevicePrimaryCtxRelease)(0) };
    assert!(
        failed.is_empty(),
        "kernels that failed through CUDA: {failed:?}"
    );
}
