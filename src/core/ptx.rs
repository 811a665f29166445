//! Reading the PTX that NVIDIA's OpenCL compiler writes (a program's
//! binary on NVIDIA's OpenCL platform): kernel headers and parameters, and
//! one rewrite of it for NVIDIA's OpenCL itself, which gives each global
//! pointer parameter of a kernel a hidden byte offset (see
//! [`add_offsets`]). Pure text work, tested without a device.

/// How a kernel takes one of its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// This many bytes by value (a scalar, vector or structure).
    Value(usize),
    /// A device address (a `__global` or `__constant` pointer).
    Pointer,
    /// Group-local memory: a 64-bit byte offset into the launch's dynamic
    /// shared memory, which must be aligned to this many bytes.
    Local(usize),
}

/// The name declared by a header line `[.visible|.weak] KIND name(...`.
pub fn header_name(t: &str, kind: &str) -> Option<String> {
    let mut words = t.split_whitespace();
    let mut w = words.next()?;
    if w == ".visible" || w == ".weak" || w == ".extern" {
        w = words.next()?;
    }
    if w != kind {
        return None;
    }
    let rest: String = words.collect::<Vec<_>>().join(" ");
    // A function returning a value: `.func (.param ...) name(`.
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')').map(|(_, n)| n.trim().to_string())?,
        None => rest,
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$' || *c == '.')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Whether `t` names `param` as a whole word.
pub fn mentions(t: &str, param: &str) -> bool {
    t.match_indices(param).any(|(at, _)| {
        let before = t[..at].chars().next_back();
        let after = t[at + param.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        !word(before) && !word(after)
    })
}

/// One parameter declaration: how the kernel takes it, and its name.
pub fn parse_param(kernel: &str, decl: &str) -> Result<(Param, String), String> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let bad = || format!("kernel {kernel}: parameter '{decl}' is not understood");
    if words.first() != Some(&".param") || words.len() < 3 {
        return Err(bad());
    }
    let last = words[words.len() - 1];
    if let Some(i) = words.iter().position(|w| *w == ".ptr") {
        let space = words.get(i + 1).copied().unwrap_or("");
        let align = words
            .iter()
            .position(|w| *w == ".align")
            .and_then(|a| words.get(a + 1))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(1);
        return match space {
            ".shared" => Ok((Param::Local(align.max(1)), last.to_string())),
            ".global" | ".const" => Ok((Param::Pointer, last.to_string())),
            _ => Err(bad()),
        };
    }
    // An array of bytes: a structure by value, `.b8 name[N]`.
    if let Some((pname, rest)) = last.split_once('[') {
        let n = rest
            .strip_suffix(']')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(bad)?;
        let elem = words
            .iter()
            .rev()
            .nth(1)
            .and_then(|w| type_bytes(w))
            .ok_or_else(bad)?;
        return Ok((Param::Value(n * elem), pname.to_string()));
    }
    let ty = words
        .iter()
        .skip(1)
        .find_map(|w| type_bytes(w))
        .ok_or_else(bad)?;
    Ok((Param::Value(ty), last.to_string()))
}

/// The size in bytes of a PTX fundamental type name (`.u32`, `.f64`...).
fn type_bytes(w: &str) -> Option<usize> {
    let bits: usize = w
        .strip_prefix(".u")
        .or_else(|| w.strip_prefix(".s"))
        .or_else(|| w.strip_prefix(".b"))
        .or_else(|| w.strip_prefix(".f"))?
        .parse()
        .ok()?;
    matches!(bits, 8 | 16 | 32 | 64).then_some(bits / 8)
}

/// The hidden offset parameter of argument `i` of kernel `k` is named
/// `{k}{OFFSET_PARAM}{i}`.
pub const OFFSET_PARAM: &str = "_syrah_off";

/// A kernel that [`add_offsets`] gave hidden offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub name: String,
    /// Per argument of the kernel's own: the index of the hidden parameter
    /// that holds its byte offset (global pointers only).
    pub offsets: Vec<Option<u32>>,
}

impl OffsetEntry {
    /// How many hidden parameters follow the kernel's own.
    pub fn hidden(&self) -> usize {
        self.offsets.iter().flatten().count()
    }
}

/// Gives every kernel of `src` whose global pointers it can follow one
/// hidden 64-bit parameter per `__global` pointer argument, after the
/// kernel's own, holding a byte offset that is added to the pointer where
/// the kernel loads it: a memory object and an offset then stand for an
/// address inside the object, as a sub-buffer would, at any offset. A
/// kernel is left as it was (and not listed) when it has no global
/// pointer, takes a `__constant` pointer (the driver fills the constant
/// bank from the start of the object), or reads a global pointer other
/// than by one plain load.
pub fn add_offsets(src: &str) -> (String, Vec<OffsetEntry>) {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::with_capacity(src.len() + 1024);
    let mut entries = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(name) = header_name(lines[i].trim(), ".entry") else {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        };
        let start = i;
        while i < lines.len() && !lines[i].trim().ends_with(')') {
            i += 1;
        }
        let header_end = (i + 1).min(lines.len());
        // The body: up to the brace that closes the first one opened.
        let (mut depth, mut opened) = (0i32, false);
        i = header_end;
        while i < lines.len() && !(opened && depth <= 0) {
            for c in lines[i].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            i += 1;
        }
        let header: Vec<&str> = lines[start..header_end].iter().map(|l| l.trim()).collect();
        match opened
            .then(|| entry_with_offsets(&name, &header, &lines[header_end..i]))
            .flatten()
        {
            Some((text, entry)) => {
                out.push_str(&text);
                entries.push(entry);
            }
            None => {
                for l in &lines[start..i] {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
    }
    (out, entries)
}

/// One kernel (its header lines and body) with hidden offsets, or `None`
/// where [`add_offsets`] leaves it alone.
fn entry_with_offsets(name: &str, header: &[&str], body: &[&str]) -> Option<(String, OffsetEntry)> {
    let joined = header.join(" ");
    let open = joined.find('(')?;
    let close = joined.rfind(')')?;
    let decls: Vec<&str> = joined
        .get(open + 1..close)?
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    // Rewritten already (PTX of a rewritten program given back): left as
    // it is, its hidden parameters then being arguments like any other.
    if decls.iter().any(|d| d.contains(OFFSET_PARAM)) {
        return None;
    }
    // The global pointers: argument index and parameter name.
    let mut pointers: Vec<(usize, String)> = Vec::new();
    for (k, d) in decls.iter().enumerate() {
        let (_, pname) = parse_param(name, d).ok()?;
        let words: Vec<&str> = d.split_whitespace().collect();
        if let Some(p) = words.iter().position(|w| *w == ".ptr") {
            match words.get(p + 1).copied() {
                Some(".global") => pointers.push((k, pname)),
                Some(".shared") => {}
                _ => return None,
            }
        }
    }
    if pointers.is_empty() {
        return None;
    }
    let mut offsets = vec![None; decls.len()];
    let mut all: Vec<String> = decls.iter().map(|d| d.to_string()).collect();
    for (n, (k, _)) in pointers.iter().enumerate() {
        all.push(format!(".param .u64 {name}{OFFSET_PARAM}{k}"));
        offsets[*k] = Some(u32::try_from(decls.len() + n).ok()?);
    }
    let mut text = format!("{}(\n", joined[..open].trim_end());
    for (i, d) in all.iter().enumerate() {
        let sep = if i + 1 < all.len() { "," } else { "" };
        text.push_str(&format!("\t{d}{sep}\n"));
    }
    text.push_str(")\n");
    for line in body {
        let t = line.trim();
        let mut named = pointers.iter().filter(|(_, p)| mentions(t, p));
        let Some((k, p)) = named.next() else {
            text.push_str(line);
            text.push('\n');
            continue;
        };
        if named.next().is_some() {
            return None;
        }
        let (op, rest) = t.strip_suffix(';')?.split_once(char::is_whitespace)?;
        let (dst, from) = rest.split_once(',')?;
        if op != "ld.param.u64" || from.trim() != format!("[{p}]") {
            return None;
        }
        let dst = dst.trim();
        text.push_str(&format!(
            "\t{{\n\t.reg .u64 \t%syrah_o;\n\tld.param.u64 \t{dst}, [{p}];\n\
             \tld.param.u64 \t%syrah_o, [{name}{OFFSET_PARAM}{k}];\n\
             \tadd.s64 \t{dst}, {dst}, %syrah_o;\n\t}}\n"
        ));
    }
    let entry = OffsetEntry {
        name: name.to_string(),
        offsets,
    };
    Some((text, entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "//\n// test module\n.version 9.0\n.target sm_90, texmode_independent\n.address_size 64\n\n\
.func (.param .b32 r) helper(\n\t.param .b64 a\n)\n{\n\tret;\n}\n\
.entry sum(\n\t.param .u64 .ptr .global .align 4 sum_param_0,\n\t.param .u64 .ptr .shared .align 8 sum_param_1,\n\t.param .f32 sum_param_2,\n\t.param .u64 .ptr .global .align 8 sum_param_3\n)\n{\n\
\t.reg .b64 \t%rd<9>;\n\tld.param.u64 \t%rd1, [sum_param_0];\n\tld.param.u64 \t%rd2, [sum_param_1];\n\
\tld.param.u64 \t%rd3, [sum_param_3];\n\t{\n\tst.global.u32 \t[%rd1], 0;\n\t}\n\tret;\n}\n\
.entry one(\n\t.param .u32 one_param_0\n)\n{\n\tret;\n}\n";

    #[test]
    fn global_pointers_get_hidden_offsets_after_the_arguments() {
        let (text, entries) = add_offsets(MODULE);
        assert_eq!(
            entries,
            vec![OffsetEntry {
                name: "sum".into(),
                offsets: vec![Some(4), None, None, Some(5)],
            }]
        );
        assert_eq!(entries[0].hidden(), 2);
        assert!(
            text.contains(
                ".entry sum(\n\t.param .u64 .ptr .global .align 4 sum_param_0,\n\
             \t.param .u64 .ptr .shared .align 8 sum_param_1,\n\t.param .f32 sum_param_2,\n\
             \t.param .u64 .ptr .global .align 8 sum_param_3,\n\t.param .u64 sum_syrah_off0,\n\
             \t.param .u64 sum_syrah_off3\n)\n{\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "\t{\n\t.reg .u64 \t%syrah_o;\n\tld.param.u64 \t%rd1, [sum_param_0];\n\
             \tld.param.u64 \t%syrah_o, [sum_syrah_off0];\n\tadd.s64 \t%rd1, %rd1, %syrah_o;\n\t}\n"
        ), "{text}");
        assert!(
            text.contains("\tadd.s64 \t%rd3, %rd3, %syrah_o;\n"),
            "{text}"
        );
        // The local pointer, the nested block and the rest are kept.
        assert!(
            text.contains("\t}\n\tld.param.u64 \t%rd2, [sum_param_1];\n\t{\n"),
            "{text}"
        );
        assert!(text.ends_with("\t}\n\t{\n\tst.global.u32 \t[%rd1], 0;\n\t}\n\tret;\n}\n.entry one(\n\t.param .u32 one_param_0\n)\n{\n\tret;\n}\n"), "{text}");
        assert!(text
            .starts_with("//\n// test module\n.version 9.0\n.target sm_90, texmode_independent\n"));
        assert!(text.contains(".func (.param .b32 r) helper(\n\t.param .b64 a\n)\n{\n\tret;\n}\n"));
    }

    #[test]
    fn kernels_it_cannot_follow_are_left_alone() {
        for (from, to) in [
            // A __constant pointer.
            (
                ".param .f32 sum_param_2",
                ".param .u64 .ptr .const .align 4 sum_param_2",
            ),
            // A global pointer read other than by one plain load.
            (
                "ld.param.u64 \t%rd3, [sum_param_3]",
                "mov.u64 \t%rd3, sum_param_3",
            ),
            (
                "ld.param.u64 \t%rd3, [sum_param_3]",
                "ld.param.u64 \t%rd3, [sum_param_3+0]",
            ),
            // A parameter it does not understand.
            (".param .f32 sum_param_2", ".param .q32 sum_param_2"),
        ] {
            let m = MODULE.replace(from, to);
            assert_eq!(add_offsets(&m), (m.clone(), vec![]), "{to}");
        }
        // No global pointer at all.
        let m = MODULE.replace(".ptr .global", ".ptr .shared");
        assert_eq!(add_offsets(&m).1, vec![]);
    }

    #[test]
    fn rewritten_ptx_is_not_rewritten_again() {
        let (once, entries) = add_offsets(MODULE);
        assert_eq!(entries.len(), 1);
        assert_eq!(add_offsets(&once), (once.clone(), vec![]));
    }

    #[test]
    fn a_kernel_without_body_is_kept() {
        let m = ".entry k(\n\t.param .u64 .ptr .global .align 4 k_param_0\n)\n";
        assert_eq!(add_offsets(m), (m.to_string(), vec![]));
    }

    #[test]
    fn names_are_matched_as_whole_words() {
        assert!(mentions("ld.param.u64 %rd2, [k_param_1];", "k_param_1"));
        assert!(!mentions("ld.param.u64 %rd2, [k_param_10];", "k_param_1"));
        assert_eq!(
            header_name(".visible .entry k_2(", ".entry").as_deref(),
            Some("k_2")
        );
        assert_eq!(
            header_name(".func  (.param .b32 func_retval0) f$1(", ".func").as_deref(),
            Some("f$1")
        );
        assert_eq!(header_name(".entry", ".entry"), None);
    }
}
