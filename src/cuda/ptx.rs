//! Turns the PTX that NVIDIA's OpenCL compiler writes (a program's binary
//! on NVIDIA's OpenCL platform) into PTX that the CUDA driver loads, and
//! says how each kernel takes its arguments there.
//!
//! That PTX differs from CUDA's in three ways, each rewritten here:
//! - its target names `texmode_independent` (OpenCL's separate samplers):
//!   the mode is dropped, and a module using textures or samplers is
//!   refused;
//! - it reads launch facts from environment registers that CUDA does not
//!   set: `%envreg0`-`2` (the first group of a launch split by the driver,
//!   0 here), `%envreg3`-`5` (the global offset, passed in a hidden last
//!   parameter of each kernel, 32-bit words) and `%envreg6`-`8` (the
//!   launch's groups, CUDA's `%nctaid`);
//! - a `__local` pointer argument is a shared-memory address given by the
//!   host: it becomes a 64-bit byte offset into the launch's dynamic shared
//!   memory, added to that memory's base where the kernel loads it;
//! - `__constant` memory is CUDA's constant bank, which OpenCL's driver
//!   fills for each launch from the argument: here it is global memory
//!   read through the non-coherent cache (`ld.global.nc`), both for
//!   arguments and for program-scope constants.
//!
//! `%envreg9` (the work dimensions) is the hidden parameter's fourth word.
//!
//! Pure text work: no driver is called, so it is tested without a device.

/// The dynamic shared memory that `__local` arguments are placed in.
pub const DYN_SMEM: &str = "__syrah_dyn_smem";
pub use crate::core::ptx::Param;
use crate::core::ptx::{header_name, mentions, parse_param};

/// Suffix of each kernel's hidden last parameter (the global offset).
pub const OFFSET_SUFFIX: &str = "_syrah_offset";
/// Bytes of the hidden parameter: the global offset in three 32-bit
/// words, then the work dimensions.
pub const OFFSET_BYTES: usize = 16;

/// A kernel of a translated module: its name and arguments, without the
/// hidden offset parameter that follows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub params: Vec<Param>,
}

/// A translated module.
#[derive(Clone, Debug)]
pub struct Translated {
    pub ptx: String,
    pub entries: Vec<Entry>,
}

/// Where a line of the module is.
enum Scope {
    Module,
    /// In kernel `entries[i]`.
    Entry(usize),
    /// In a device function (named).
    Func(String),
}

/// Translates `src`; an error names the construct that cannot be carried
/// over, and the kernel it is in.
pub fn translate(src: &str) -> Result<Translated, String> {
    for word in [".texref", ".samplerref", ".surfref"] {
        if src.contains(word) {
            return Err(format!(
                "the module uses images or samplers ({word}), which the CUDA back end does not take"
            ));
        }
    }
    let mut out = String::with_capacity(src.len() + 1024);
    let mut entries: Vec<Entry> = Vec::new();
    // The `__local` parameter names of each kernel.
    let mut locals: Vec<Vec<String>> = Vec::new();
    let mut scope = Scope::Module;
    let mut lines = src.lines();
    let needs_smem = src.contains(".ptr .shared");
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with(".target") {
            let kept: Vec<&str> = t
                .split(',')
                .map(str::trim)
                .filter(|w| *w != "texmode_independent")
                .collect();
            out.push_str(&kept.join(", "));
            out.push('\n');
            continue;
        }
        if t.starts_with(".address_size") {
            out.push_str(line);
            out.push('\n');
            if needs_smem {
                out.push_str(&format!(".extern .shared .align 16 .b8 {DYN_SMEM}[];\n"));
            }
            continue;
        }
        if let Some(name) = header_name(t, ".entry") {
            let mut header = vec![t.to_string()];
            while !header.last().is_some_and(|l| l.ends_with(')')) {
                match lines.next() {
                    Some(l) => header.push(l.trim().to_string()),
                    None => return Err(format!("kernel {name}: its parameter list does not end")),
                }
            }
            let (entry, local_names, text) = rewrite_entry(&name, &header)?;
            out.push_str(&text);
            entries.push(entry);
            locals.push(local_names);
            scope = Scope::Entry(entries.len() - 1);
            continue;
        }
        if let Some(name) = header_name(t, ".func") {
            scope = Scope::Func(name);
        }
        if t.contains("%envreg") {
            out.push_str(&rewrite_envreg(t, &scope, &entries)?);
            out.push('\n');
            continue;
        }
        if let Scope::Entry(i) = scope {
            if let Some(p) = locals[i].iter().find(|p| mentions(t, p)) {
                out.push_str(&rewrite_local_load(t, p, &entries[i].name)?);
                out.push('\n');
                continue;
            }
        }
        out.push_str(&const_to_global(line));
        out.push('\n');
    }
    Ok(Translated { ptx: out, entries })
}

/// The kernel header rewritten (a `__local` pointer becomes a 64-bit
/// offset, the hidden offset parameter is added last), with the kernel's
/// arguments and its `__local` parameter names.
fn rewrite_entry(name: &str, header: &[String]) -> Result<(Entry, Vec<String>, String), String> {
    let joined = header.join(" ");
    let open = joined
        .find('(')
        .ok_or_else(|| format!("kernel {name}: no parameter list"))?;
    let close = joined.rfind(')').unwrap_or(joined.len());
    let inner = joined.get(open + 1..close).unwrap_or("");
    let mut params = Vec::new();
    let mut local_names = Vec::new();
    let mut decls = Vec::new();
    for decl in inner.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (param, pname) = parse_param(name, decl)?;
        if let Param::Local(_) = param {
            decls.push(format!(".param .u64 {pname}"));
            local_names.push(pname);
        } else {
            decls.push(decl.replace(".ptr .const", ".ptr .global"));
        }
        params.push(param);
    }
    decls.push(format!(
        ".param .align 4 .b8 {name}{OFFSET_SUFFIX}[{OFFSET_BYTES}]"
    ));
    let lead = joined[..open].trim_end();
    let mut text = format!("{lead}(\n");
    for (i, d) in decls.iter().enumerate() {
        let sep = if i + 1 < decls.len() { "," } else { "" };
        text.push_str(&format!("\t{d}{sep}\n"));
    }
    text.push_str(")\n");
    let entry = Entry {
        name: name.to_string(),
        params,
    };
    Ok((entry, local_names, text))
}

/// `line` with the constant state space made global: a declaration of
/// program-scope constants, and the loads, conversions and tests of
/// addresses in it.
fn const_to_global(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains(".const") {
        return line.into();
    }
    let t = line.trim_start();
    let lead = &line[..line.len() - t.len()];
    let (word, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
    let swapped = if let Some(tail) = word.strip_prefix("ld.const") {
        format!("ld.global.nc{tail}")
    } else if word.starts_with("cvta.") || word.starts_with("isspacep.") {
        word.replace(".const", ".global")
    } else if word == ".const" || word == ".visible" || word == ".extern" {
        return format!("{lead}{}", t.replacen(".const ", ".global ", 1)).into();
    } else {
        return line.into();
    };
    format!("{lead}{swapped}\t{}", rest.trim_start()).into()
}

/// A read of an environment register, as CUDA gives that fact.
fn rewrite_envreg(t: &str, scope: &Scope, entries: &[Entry]) -> Result<String, String> {
    let where_ = match scope {
        Scope::Module => "outside any function".to_string(),
        Scope::Entry(i) => format!("kernel {}", entries[*i].name),
        Scope::Func(f) => format!("function {f}"),
    };
    let bad = || {
        format!(
            "{where_}: '{t}' reads an environment register in a way the translation does not know"
        )
    };
    let body = t.strip_suffix(';').ok_or_else(bad)?;
    let (op, rest) = body.split_once(char::is_whitespace).ok_or_else(bad)?;
    let (dst, srcreg) = rest.split_once(',').ok_or_else(bad)?;
    let (dst, srcreg) = (dst.trim(), srcreg.trim());
    if !op.starts_with("mov.") || op.len() != 7 || !op.ends_with("32") {
        return Err(bad());
    }
    let k: u32 = srcreg
        .strip_prefix("%envreg")
        .and_then(|k| k.parse().ok())
        .ok_or_else(bad)?;
    let axis = ["x", "y", "z"];
    Ok(match k {
        0..=2 => format!("\t{op} \t{dst}, 0;"),
        3..=5 => match scope {
            Scope::Entry(i) => format!(
                "\tld.param.u32 \t{dst}, [{}{OFFSET_SUFFIX}+{}];",
                entries[*i].name,
                4 * (k - 3)
            ),
            _ => {
                return Err(format!(
                    "{where_}: reads the global offset outside a kernel, which the translation cannot pass there"
                ))
            }
        },
        6..=8 => format!("\tmov.u32 \t{dst}, %nctaid.{};", axis[(k - 6) as usize]),
        9 => match scope {
            Scope::Entry(i) => format!("\tld.param.u32 \t{dst}, [{}{OFFSET_SUFFIX}+12];", entries[*i].name),
            _ => {
                return Err(format!(
                    "{where_}: reads the work dimensions outside a kernel, which the translation cannot pass there"
                ))
            }
        },
        _ => {
            return Err(format!(
                "{where_}: reads %envreg{k}, an environment register the translation does not know"
            ))
        }
    })
}

/// A load of `__local` parameter `p`: the host gave an offset into the
/// dynamic shared memory, so the base is added to what is loaded.
fn rewrite_local_load(t: &str, p: &str, kernel: &str) -> Result<String, String> {
    let bad = || {
        format!("kernel {kernel}: '{t}' uses the __local argument {p} in a way the translation does not know")
    };
    let body = t.strip_suffix(';').ok_or_else(bad)?;
    let (op, rest) = body.split_once(char::is_whitespace).ok_or_else(bad)?;
    let (dst, src) = rest.split_once(',').ok_or_else(bad)?;
    if op != "ld.param.u64" || src.trim() != format!("[{p}]") {
        return Err(bad());
    }
    let dst = dst.trim();
    Ok(format!(
        "\t{{\n\t.reg .u64 \t%syrah_b;\n\tld.param.u64 \t{dst}, [{p}];\n\tmov.u64 \t%syrah_b, {DYN_SMEM};\n\tadd.u64 \t{dst}, {dst}, %syrah_b;\n\t}}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "//\n// test module\n.version 9.0\n.target sm_90, texmode_independent\n.address_size 64\n\n\
.entry sum(\n\t.param .u64 .ptr .global .align 4 sum_param_0,\n\t.param .u64 .ptr .shared .align 8 sum_param_1,\n\t.param .f32 sum_param_2,\n\t.param .align 8 .b8 sum_param_3[24]\n)\n{\n\
\t.reg .b32 \t%r<9>;\n\t.reg .b64 \t%rd<9>;\n\tld.param.u64 \t%rd1, [sum_param_0];\n\tld.param.u64 \t%rd2, [sum_param_1];\n\
\tmov.b32 \t%r1, %envreg3;\n\tmov.b32 \t%r2, %envreg0;\n\tmov.b32 \t%r3, %envreg7;\n\tmov.u32 \t%r4, %envreg5;\n\tret;\n}\n\
.entry one()\n{\n\tret;\n}\n";

    #[test]
    fn target_mode_is_dropped_and_shared_memory_declared() {
        let t = translate(MODULE).map(|t| t.ptx).unwrap_or_default();
        assert!(t.contains("\n.target sm_90\n"), "{t}");
        assert!(!t.contains("texmode"));
        assert!(t.contains(".address_size 64\n.extern .shared .align 16 .b8 __syrah_dyn_smem[];\n"));
    }

    #[test]
    fn kernels_arguments_are_read_with_sizes() {
        let t = translate(MODULE).map(|t| t.entries).unwrap_or_default();
        assert_eq!(
            t,
            vec![
                Entry {
                    name: "sum".into(),
                    params: vec![
                        Param::Pointer,
                        Param::Local(8),
                        Param::Value(4),
                        Param::Value(24)
                    ],
                },
                Entry {
                    name: "one".into(),
                    params: vec![],
                },
            ]
        );
    }

    #[test]
    fn header_gets_offset_parameter_and_local_becomes_offset() {
        let t = translate(MODULE).map(|t| t.ptx).unwrap_or_default();
        assert!(t.contains(
            ".entry sum(\n\t.param .u64 .ptr .global .align 4 sum_param_0,\n\t.param .u64 sum_param_1,\n\
             \t.param .f32 sum_param_2,\n\t.param .align 8 .b8 sum_param_3[24],\n\
             \t.param .align 4 .b8 sum_syrah_offset[16]\n)\n"
        ), "{t}");
        assert!(
            t.contains(".entry one(\n\t.param .align 4 .b8 one_syrah_offset[16]\n)\n"),
            "{t}"
        );
    }

    #[test]
    fn environment_registers_become_cuda_facts() {
        let t = translate(MODULE).map(|t| t.ptx).unwrap_or_default();
        assert!(
            t.contains("\tld.param.u32 \t%r1, [sum_syrah_offset+0];\n"),
            "{t}"
        );
        assert!(t.contains("\tmov.b32 \t%r2, 0;\n"));
        assert!(t.contains("\tmov.u32 \t%r3, %nctaid.y;\n"));
        assert!(t.contains("\tld.param.u32 \t%r4, [sum_syrah_offset+8];\n"));
        assert!(!t.contains("envreg"));
    }

    #[test]
    fn local_argument_load_adds_the_shared_base() {
        let t = translate(MODULE).map(|t| t.ptx).unwrap_or_default();
        assert!(t.contains(
            "\t{\n\t.reg .u64 \t%syrah_b;\n\tld.param.u64 \t%rd2, [sum_param_1];\n\tmov.u64 \t%syrah_b, __syrah_dyn_smem;\n\
             \tadd.u64 \t%rd2, %rd2, %syrah_b;\n\t}\n"
        ), "{t}");
        // The global pointer's load is left alone.
        assert!(t.contains("\tld.param.u64 \t%rd1, [sum_param_0];\n"));
    }

    #[test]
    fn what_cannot_be_carried_over_is_named() {
        let with = |from: &str, to: &str| {
            translate(&MODULE.replace(from, to))
                .err()
                .unwrap_or_default()
        };
        assert_eq!(
            with("%envreg7", "%envreg12"),
            "kernel sum: reads %envreg12, an environment register the translation does not know"
        );
        let t = translate(&MODULE.replace("%envreg7", "%envreg9"))
            .map(|t| t.ptx)
            .unwrap_or_default();
        assert!(
            t.contains("\tld.param.u32 \t%r3, [sum_syrah_offset+12];\n"),
            "{t}"
        );
        assert_eq!(
            with("mov.b32 \t%r1, %envreg3", "add.s32 \t%r1, %r1, %envreg3"),
            "kernel sum: 'add.s32 \t%r1, %r1, %envreg3;' reads an environment register in a way the translation does not know"
        );
        assert_eq!(
            with("ld.param.u64 \t%rd2, [sum_param_1]", "mov.u64 \t%rd2, sum_param_1"),
            "kernel sum: 'mov.u64 \t%rd2, sum_param_1;' uses the __local argument sum_param_1 in a way the translation does not know"
        );
        assert_eq!(
            with(".address_size 64", ".address_size 64\n.global .texref t;"),
            "the module uses images or samplers (.texref), which the CUDA back end does not take"
        );
        assert_eq!(
            with(".param .f32 sum_param_2", ".param .q32 sum_param_2"),
            "kernel sum: parameter '.param .q32 sum_param_2' is not understood"
        );
    }

    #[test]
    fn offset_in_a_function_is_refused_and_other_registers_carried() {
        let f = ".func (.param .b32 r) helper(\n\t.param .b32 a\n)\n{\n\tmov.b32 \t%r1, %envreg4;\n\tret;\n}\n";
        let e = translate(&format!("{MODULE}{f}")).err().unwrap_or_default();
        assert_eq!(
            e,
            "function helper: reads the global offset outside a kernel, which the translation cannot pass there"
        );
        let g = f.replace("%envreg4", "%envreg8");
        let t = translate(&format!("{MODULE}{g}"))
            .map(|t| t.ptx)
            .unwrap_or_default();
        assert!(t.contains("\tmov.u32 \t%r1, %nctaid.z;\n"), "{t}");
    }

    #[test]
    fn constant_memory_becomes_global_memory() {
        let m = MODULE
            .replace(".param .f32 sum_param_2", ".param .u64 .ptr .const .align 4 sum_param_2")
            .replace(".address_size 64\n", ".address_size 64\n.const .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};\n")
            .replace("\tret;\n}\n.entry one", "\tld.const.v2.f32 \t{%f1, %f2}, [%rd3];\n\tcvta.const.u64 \t%rd4, table;\n\tret;\n}\n.entry one");
        let t = translate(&m).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            t.ptx
                .contains("\t.param .u64 .ptr .global .align 4 sum_param_2,\n"),
            "{}",
            t.ptx
        );
        assert!(t
            .ptx
            .contains("\n.global .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};\n"));
        assert!(t
            .ptx
            .contains("\tld.global.nc.v2.f32\t{%f1, %f2}, [%rd3];\n"));
        assert!(t.ptx.contains("\tcvta.global.u64\t%rd4, table;\n"));
        assert!(!t.ptx.contains("const"));
        assert_eq!(t.entries[0].params[2], Param::Pointer);
    }
}
