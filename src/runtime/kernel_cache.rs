//! Compiled kernels kept on disk across processes: the PTX NVIDIA's
//! OpenCL compiler made from OpenCL C, found again by its source, options
//! and compiler, so that a later process builds without compiling: the
//! CUDA back end without its OpenCL twin, NVIDIA's OpenCL from the PTX
//! it rewrites.
//!
//! Each entry is one file holding its whole key and the binary; a file
//! whose key differs from the one asked for (a hash collision), or that
//! cannot be read whole, is no entry. Files are written under a temporary
//! name and renamed, so a reader never sees half of one.

use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a compiled binary was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key<'a> {
    /// The compiler: the twin device's name, driver and version.
    pub compiler: &'a str,
    pub options: &'a str,
    pub source: &'a [u8],
}

const MAGIC: &[u8; 8] = b"SYRAHKC1";

/// The cache directory: `SYRAH_CACHE_DIR` (empty or `off`: no cache),
/// else `$XDG_CACHE_HOME/syrah/kernels`, else `$HOME/.cache/syrah/kernels`.
pub fn dir() -> Option<PathBuf> {
    dir_from(
        std::env::var_os("SYRAH_CACHE_DIR"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

fn dir_from(
    own: Option<OsString>,
    xdg: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let set = |v: &Option<OsString>| v.as_ref().filter(|s| !s.is_empty()).cloned();
    if let Some(own) = own {
        return (!own.is_empty() && own != "off").then(|| PathBuf::from(own));
    }
    if let Some(x) = set(&xdg) {
        return Some(PathBuf::from(x).join("syrah").join("kernels"));
    }
    set(&home).map(|h| {
        PathBuf::from(h)
            .join(".cache")
            .join("syrah")
            .join("kernels")
    })
}

fn file_name(key: &Key<'_>) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    format!("{:016x}.bin", h.finish())
}

fn encode(key: &Key<'_>, binary: &[u8]) -> Vec<u8> {
    let parts: [&[u8]; 4] = [
        key.compiler.as_bytes(),
        key.options.as_bytes(),
        key.source,
        binary,
    ];
    let mut out =
        Vec::with_capacity(MAGIC.len() + parts.iter().map(|p| 8 + p.len()).sum::<usize>());
    out.extend_from_slice(MAGIC);
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The binary in `file` if the file holds exactly `key`'s entry.
fn decode(file: &[u8], key: &Key<'_>) -> Option<Vec<u8>> {
    let mut rest = file.strip_prefix(MAGIC.as_slice())?;
    let mut next = || -> Option<&[u8]> {
        let (len, tail) = rest.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        let (part, tail) = (tail.get(..len)?, tail.get(len..)?);
        rest = tail;
        Some(part)
    };
    let same = next()? == key.compiler.as_bytes()
        && next()? == key.options.as_bytes()
        && next()? == key.source;
    let binary = next()?.to_vec();
    (same && rest.is_empty() && !binary.is_empty()).then_some(binary)
}

/// The binary kept in `dir` for `key`, if any.
pub fn load(dir: &Path, key: &Key<'_>) -> Option<Vec<u8>> {
    let file = std::fs::read(dir.join(file_name(key))).ok()?;
    decode(&file, key)
}

/// Keeps `binary` in `dir` for `key`, creating `dir` if needed.
pub fn store(dir: &Path, key: &Key<'_>, binary: &[u8]) -> std::io::Result<()> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    // What is kept here is loaded and run as it is: the directories made
    // are the user's alone.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let name = file_name(key);
    let tmp = dir.join(format!(
        "{name}.{}.{}.tmp",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(&encode(key, binary))
                .and_then(|()| f.sync_all())
        })
        .and_then(|()| std::fs::rename(&tmp, dir.join(&name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Drops the entry kept for `key` (one that did not build).
pub fn forget(dir: &Path, key: &Key<'_>) {
    let _ = std::fs::remove_file(dir.join(file_name(key)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn key<'a>(source: &'a [u8], options: &'a str) -> Key<'a> {
        Key {
            compiler: "GPU 1 / driver 580 / OpenCL 3.0",
            options,
            source,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("syrah-kc-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn an_entry_is_found_only_under_its_whole_key() {
        let d = scratch("key");
        let k = key(b"__kernel void f() {}", "-cl-fast-relaxed-math");
        assert_eq!(load(&d, &k), None);
        store(&d, &k, b"binary one").expect("stored");
        assert_eq!(load(&d, &k).as_deref(), Some(b"binary one".as_slice()));
        let mode = std::fs::metadata(&d).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o700));
        assert_eq!(
            load(&d, &key(b"__kernel void f() {} ", "-cl-fast-relaxed-math")),
            None
        );
        assert_eq!(load(&d, &key(b"__kernel void f() {}", "")), None);
        let other = Key {
            compiler: "GPU 1 / driver 581 / OpenCL 3.0",
            ..k
        };
        assert_eq!(load(&d, &other), None);
        // A later entry for the same key replaces the first.
        store(&d, &k, b"binary two").expect("stored");
        assert_eq!(load(&d, &k).as_deref(), Some(b"binary two".as_slice()));
        assert_eq!(std::fs::read_dir(&d).map(|r| r.count()).unwrap_or(0), 1);
        forget(&d, &k);
        assert_eq!(load(&d, &k), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_of_another_key_or_cut_short_is_no_entry() {
        let k = key(b"src", "-O");
        let whole = encode(&k, b"PTX");
        assert_eq!(decode(&whole, &k).as_deref(), Some(b"PTX".as_slice()));
        // The same name held by another key's entry (a collision).
        assert_eq!(decode(&encode(&key(b"other", "-O"), b"PTX"), &k), None);
        for cut in 0..whole.len() {
            assert_eq!(decode(&whole[..cut], &k), None, "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(decode(&longer, &k), None);
        let mut bad_len = whole.clone();
        bad_len[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(decode(&bad_len, &k), None);
        assert_eq!(decode(&encode(&k, b""), &k), None);
    }

    #[test]
    fn the_directory_comes_from_the_environment() {
        let s = |v: &str| Some(OsString::from(v));
        assert_eq!(
            dir_from(s("/c"), s("/x"), s("/h")),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(dir_from(s("off"), s("/x"), s("/h")), None);
        assert_eq!(dir_from(s(""), s("/x"), s("/h")), None);
        assert_eq!(
            dir_from(None, s("/x"), s("/h")),
            Some(PathBuf::from("/x/syrah/kernels"))
        );
        assert_eq!(
            dir_from(None, s(""), s("/h")),
            Some(PathBuf::from("/h/.cache/syrah/kernels"))
        );
        assert_eq!(dir_from(None, None, None), None);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error_not_a_panic() {
        let d = scratch("blocked");
        std::fs::create_dir_all(&d).expect("made");
        let file = d.join("a-file");
        std::fs::write(&file, b"x").expect("written");
        let k = key(b"s", "");
        assert!(store(&file.join("below"), &k, b"b").is_err());
        assert_eq!(load(&file.join("below"), &k), None);
        let _ = std::fs::remove_dir_all(&d);
    }
}
