//! Text of the two diagnostic outputs: a Chrome/Perfetto trace (JSON array
//! of trace events) and a Graphviz dependency graph. Pure formatting, no
//! OpenCL.

use std::fmt::Write;

/// One finished command on a timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Command id (the same id names the command's node in the graph).
    pub id: u64,
    pub name: String,
    /// "kernel", "copy", "fill", "host task" or "other".
    pub category: &'static str,
    /// Timeline process: one per device, plus one for host tasks.
    pub pid: u64,
    /// Timeline thread: the lane (or host worker).
    pub tid: u64,
    /// Start and duration in nanoseconds since the trace began.
    pub start_ns: u64,
    pub dur_ns: u64,
    /// Bytes moved, for copies and fills.
    pub bytes: Option<u64>,
    pub failed: bool,
}

/// The category of a command from its description.
pub fn category(what: &str) -> &'static str {
    if what.starts_with("host task") {
        "host task"
    } else if what.contains("fill") {
        "fill"
    } else if what.contains("copy") || what.contains("memcpy") || what.contains("prefetch") {
        "copy"
    } else if what.starts_with("kernel") {
        "kernel"
    } else {
        "other"
    }
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    quoted(s, true)
}

/// `s` quoted with backslash escapes; control characters become `\uXXXX`
/// in JSON and spaces in Graphviz, which has no such escape.
fn quoted(s: &str, json: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' if json => out.push_str("\\r"),
            '\t' if json => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                if json {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    out.push(' ');
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Microseconds with nanosecond precision, as trace viewers expect.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// One complete ("X") trace event.
pub fn span_json(s: &Span) -> String {
    let mut args = format!("\"id\":{}", s.id);
    if let Some(b) = s.bytes {
        let _ = write!(args, ",\"bytes\":{b}");
        if s.dur_ns > 0 {
            // Bytes per nanosecond are GB/s.
            let _ = write!(args, ",\"GB/s\":{:.3}", b as f64 / s.dur_ns as f64);
        }
    }
    if s.failed {
        args.push_str(",\"failed\":true");
    }
    format!(
        "{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{},\"args\":{{{args}}}}}",
        json_string(&s.name),
        json_string(s.category),
        micros(s.start_ns),
        micros(s.dur_ns),
        s.pid,
        s.tid
    )
}

/// A metadata event naming a timeline process or thread.
pub fn name_json(pid: u64, tid: Option<u64>, name: &str) -> String {
    match tid {
        None => format!(
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"args\":{{\"name\":{}}}}}",
            json_string(name)
        ),
        Some(t) => format!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{t},\"args\":{{\"name\":{}}}}}",
            json_string(name)
        ),
    }
}

/// `s` as a Graphviz quoted string.
pub fn dot_string(s: &str) -> String {
    quoted(s, false)
}

/// A graph node for command `id`, labelled with what it is and where it ran.
pub fn dot_node(id: u64, what: &str, place: &str) -> String {
    let shape = match category(what) {
        "kernel" => "box",
        "copy" | "fill" => "ellipse",
        "host task" => "hexagon",
        _ => "point",
    };
    let label = format!("{what}\n{place}");
    format!("  n{id} [shape={shape}, label={}];", dot_string(&label))
}

/// A graph edge: `to` waits for `from`.
pub fn dot_edge(from: u64, to: u64) -> String {
    format!("  n{from} -> n{to};")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        assert_eq!(category("kernel vadd"), "kernel");
        assert_eq!(category("buffer copy of 4096 bytes"), "copy");
        assert_eq!(category("memcpy of 8 bytes"), "copy");
        assert_eq!(category("buffer fill"), "fill");
        assert_eq!(category("host task"), "host task");
        assert_eq!(category("barrier"), "other");
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_string("µs"), "\"µs\"");
        assert_eq!(dot_string("a\"b\n\t"), "\"a\\\"b\\n \"");
    }

    #[test]
    fn span_has_exact_fields() {
        let s = Span {
            id: 7,
            name: "buffer copy of 4096 bytes".into(),
            category: "copy",
            pid: 2,
            tid: 5,
            start_ns: 1_234_567,
            dur_ns: 2_048,
            bytes: Some(4096),
            failed: false,
        };
        assert_eq!(
            span_json(&s),
            "{\"name\":\"buffer copy of 4096 bytes\",\"cat\":\"copy\",\"ph\":\"X\",\
             \"ts\":1234.567,\"dur\":2.048,\"pid\":2,\"tid\":5,\
             \"args\":{\"id\":7,\"bytes\":4096,\"GB/s\":2.000}}"
        );
        let k = Span {
            bytes: None,
            failed: true,
            dur_ns: 0,
            ..s
        };
        assert!(span_json(&k).ends_with("\"args\":{\"id\":7,\"failed\":true}}"));
    }

    #[test]
    fn names_and_graph() {
        assert_eq!(
            name_json(1, None, "GPU \"0\""),
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"GPU \\\"0\\\"\"}}"
        );
        assert_eq!(
            name_json(1, Some(3), "lane 3"),
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":3,\"args\":{\"name\":\"lane 3\"}}"
        );
        assert_eq!(
            dot_node(4, "kernel k", "device 0.1"),
            "  n4 [shape=box, label=\"kernel k\\ndevice 0.1\"];"
        );
        assert_eq!(dot_edge(3, 4), "  n3 -> n4;");
    }
}
