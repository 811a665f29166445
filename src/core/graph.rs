//! Command graphs' replay plan, worked out once when a graph is finalized:
//! which in-order lane each directly enqueued node goes to, which nodes
//! need an event because something off their lane waits for them, what
//! each node waits for, and which nodes stand for the whole graph's end.
//! Pure logic: no OpenCL.

/// How a node is replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Enqueued straight onto one of the graph's in-order lanes.
    Direct,
    /// Submitted through the queue's ordinary path (it gets an event of its
    /// own and waits for events only).
    Eager,
    /// Orders nothing but its dependencies (a recorded barrier).
    Empty,
}

/// A node as recorded: its kind and the earlier nodes it depends on.
#[derive(Clone, Debug)]
pub struct PlanNode {
    pub kind: NodeKind,
    /// Indices of earlier nodes.
    pub deps: Vec<usize>,
}

/// What the replay does for one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The lane a direct node goes to.
    pub lane: usize,
    /// Nodes whose events this node waits for (its lane's order covers the
    /// rest of its dependencies).
    pub waits: Vec<usize>,
    /// The node waits for what the submission itself waits for.
    pub external: bool,
    /// Something waits for this node's event: it must ask for one.
    pub event: bool,
}

/// The replay plan of a graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// One step per node, in recording order (a topological order: a node
    /// depends only on earlier ones). Empty nodes have default steps.
    pub steps: Vec<Step>,
    /// Lanes the direct nodes use.
    pub lanes: usize,
    /// Nodes whose completion means the graph's: the last direct node of
    /// each lane and every eager node nothing else waits for. Each of these
    /// has `event` set, except the last node of lane 0, which the end
    /// marker (enqueued on lane 0) follows in order.
    pub ends: Vec<usize>,
}

/// Dependencies of each node with empty nodes replaced by what they
/// depend on, without repeats.
pub fn resolve_empty(nodes: &[PlanNode]) -> Result<Vec<Vec<usize>>, String> {
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let mut deps = Vec::new();
        for &d in &n.deps {
            if d >= i {
                return Err(format!(
                    "node {i} depends on node {d}, which is not earlier"
                ));
            }
            if nodes[d].kind == NodeKind::Empty {
                deps.extend(out[d].iter().copied());
            } else {
                deps.push(d);
            }
        }
        deps.sort_unstable();
        deps.dedup();
        out.push(deps);
    }
    Ok(out)
}

/// Works out the plan, using at most `max_lanes` lanes (at least one).
pub fn plan(nodes: &[PlanNode], max_lanes: usize) -> Result<Plan, String> {
    let max_lanes = max_lanes.max(1);
    let deps = resolve_empty(nodes)?;
    let mut steps = vec![Step::default(); nodes.len()];
    // Per lane: its last node so far, and how many nodes it has.
    let mut tails: Vec<usize> = Vec::new();
    let mut count: Vec<usize> = Vec::new();
    // Each node's place on its lane.
    let mut seq = vec![0usize; nodes.len()];
    let mut has_succ = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &deps[i] {
            has_succ[d] = true;
        }
        match n.kind {
            NodeKind::Empty => {}
            NodeKind::Eager => {
                steps[i].waits = deps[i].clone();
                steps[i].external = deps[i].is_empty();
                steps[i].event = true;
            }
            NodeKind::Direct => {
                let direct = |d: &usize| nodes[*d].kind == NodeKind::Direct;
                // Continue the lane of a dependency that is its lane's tail.
                let lane = match deps[i]
                    .iter()
                    .filter(|d| direct(d))
                    .find_map(|&d| tails.iter().position(|&t| t == d))
                {
                    Some(l) => l,
                    None if tails.len() < max_lanes => {
                        tails.push(usize::MAX);
                        count.push(0);
                        tails.len() - 1
                    }
                    // Full: the lane whose tail came first.
                    None => (0..tails.len()).min_by_key(|&l| tails[l]).unwrap_or(0),
                };
                // Per other lane, only the latest dependency there matters.
                let mut latest: Vec<Option<usize>> = vec![None; tails.len()];
                let mut waits = Vec::new();
                for &d in &deps[i] {
                    if direct(&d) {
                        let l = steps[d].lane;
                        if l != lane && latest[l].is_none_or(|o| seq[o] < seq[d]) {
                            latest[l] = Some(d);
                        }
                    } else {
                        waits.push(d);
                    }
                }
                waits.extend(latest.into_iter().flatten());
                waits.sort_unstable();
                steps[i].lane = lane;
                steps[i].waits = waits;
                steps[i].external = deps[i].is_empty() && count[lane] == 0;
                seq[i] = count[lane];
                count[lane] += 1;
                tails[lane] = i;
            }
        }
    }
    for i in 0..nodes.len() {
        for w in steps[i].waits.clone() {
            steps[w].event = true;
        }
    }
    let mut ends: Vec<usize> = tails.iter().copied().filter(|&t| t != usize::MAX).collect();
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == NodeKind::Eager && !has_succ[i] {
            ends.push(i);
        }
    }
    for (k, &e) in ends.iter().enumerate() {
        // The end marker goes on lane 0, behind its tail.
        if !(k == 0 && nodes[e].kind == NodeKind::Direct && steps[e].lane == 0) {
            steps[e].event = true;
        }
    }
    Ok(Plan {
        steps,
        lanes: tails.len(),
        ends,
    })
}

/// Whether two accesses of one buffer view, boxes `(offset, range)` in
/// elements, overlap.
pub fn boxes_overlap(a: ([usize; 3], [usize; 3]), b: ([usize; 3], [usize; 3])) -> bool {
    (0..3).all(|k| {
        let (ao, ar) = (a.0[k], a.1[k]);
        let (bo, br) = (b.0[k], b.1[k]);
        ar > 0 && br > 0 && ao < bo + br && bo < ao + ar
    })
}

/// The smallest box holding boxes `a` and `b`, each `(offset, range)`.
pub fn union_box(
    a: ([usize; 3], [usize; 3]),
    b: ([usize; 3], [usize; 3]),
) -> ([usize; 3], [usize; 3]) {
    let mut offset = [0; 3];
    let mut range = [0; 3];
    for k in 0..3 {
        let lo = a.0[k].min(b.0[k]);
        let hi = (a.0[k] + a.1[k]).max(b.0[k] + b.1[k]);
        offset[k] = lo;
        range[k] = hi - lo;
    }
    (offset, range)
}

/// Submissions of each back end timed before a graph keeps one.
pub const TRIALS: usize = 3;

/// Chooses, per finalized graph that can use a command-buffer, between
/// it and the planned replay by what a submission costs the host: drivers
/// differ (a CPU driver may run a command-buffer's commands no sooner than
/// the same commands enqueued one by one, and record sync points on top).
/// Submissions alternate until each back end has `TRIALS` timed ones (the
/// first of each, which records the command-buffer or warms the driver,
/// is not counted); then the one with the lower median is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendChooser {
    /// Host nanoseconds of the counted submissions: replay, command-buffer.
    times: [Vec<u64>; 2],
    /// Submissions seen of each.
    seen: [u32; 2],
    /// The kept back end: `Some(true)` for the command-buffer.
    pub decided: Option<bool>,
}

impl BackendChooser {
    /// Whether the next submission uses the command-buffer.
    pub fn next_is_buffer(&self) -> bool {
        self.decided.unwrap_or(self.seen[1] <= self.seen[0])
    }

    /// Records what a submission through the command-buffer (`buffer`) or
    /// the replay cost the host.
    pub fn record(&mut self, buffer: bool, ns: u64) {
        if self.decided.is_some() {
            return;
        }
        let i = usize::from(buffer);
        self.seen[i] = self.seen[i].saturating_add(1);
        if self.seen[i] > 1 {
            self.times[i].push(ns);
        }
        if self.times.iter().all(|t| t.len() >= TRIALS) {
            let med = |v: &Vec<u64>| {
                let mut v = v.clone();
                v.sort_unstable();
                v[v.len() / 2]
            };
            self.decided = Some(med(&self.times[1]) < med(&self.times[0]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(kind: NodeKind, deps: &[usize]) -> PlanNode {
        PlanNode {
            kind,
            deps: deps.to_vec(),
        }
    }
    use NodeKind::*;

    #[test]
    fn chain_is_one_lane_without_events_but_none() {
        let nodes: Vec<_> = (0..5usize)
            .map(|i| PlanNode {
                kind: Direct,
                deps: i.checked_sub(1).into_iter().collect(),
            })
            .collect();
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.lanes, 1);
        assert!(p.steps.iter().all(|s| s.lane == 0 && s.waits.is_empty()));
        assert!(p.steps.iter().all(|s| !s.event));
        assert_eq!(p.ends, vec![4]);
        assert!(p.steps[0].external);
        assert!(!p.steps[1].external);
    }

    #[test]
    fn diamond_uses_two_lanes_and_one_cross_event_each_way() {
        let nodes = vec![
            n(Direct, &[]),
            n(Direct, &[0]),
            n(Direct, &[0]),
            n(Direct, &[1, 2]),
        ];
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.lanes, 2);
        assert_eq!(p.steps[1].lane, 0);
        assert_eq!(p.steps[2].lane, 1);
        assert_eq!(p.steps[2].waits, vec![0]);
        assert_eq!(p.steps[3].lane, 0);
        assert_eq!(p.steps[3].waits, vec![2]);
        assert!(p.steps[0].event && p.steps[2].event);
        assert!(!p.steps[1].event && !p.steps[3].event);
        // Lane 1's tail is node 2, already waited for; lane 0 ends with 3.
        assert_eq!(p.ends, vec![3, 2]);
    }

    #[test]
    fn independent_roots_spread_then_share_lanes() {
        let nodes = vec![n(Direct, &[]), n(Direct, &[]), n(Direct, &[])];
        let p = plan(&nodes, 2).expect("plan");
        assert_eq!(p.lanes, 2);
        assert_eq!(p.steps[2].lane, 0);
        assert!(p.steps.iter().all(|s| s.waits.is_empty()));
        assert!(p.steps[0].external && p.steps[1].external);
        // Lane 0's second node follows its first in order.
        assert!(!p.steps[2].external);
        assert_eq!(p.ends, vec![2, 1]);
        assert!(p.steps[1].event && !p.steps[2].event);
    }

    #[test]
    fn only_the_latest_dependency_of_another_lane_is_waited_for() {
        // 0 -> 1 on lane 0; 2 on lane 1; 3 depends on 0, 1 and 2.
        let nodes = vec![
            n(Direct, &[]),
            n(Direct, &[0]),
            n(Direct, &[]),
            n(Direct, &[2, 0, 1]),
        ];
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.steps[3].lane, 0);
        assert_eq!(p.steps[3].waits, vec![2]);
        let nodes = vec![
            n(Direct, &[]),
            n(Direct, &[0]),
            n(Direct, &[]),
            n(Direct, &[0, 1, 2]),
        ];
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.steps[3].waits, vec![2]);
    }

    #[test]
    fn eager_nodes_wait_for_and_give_events() {
        let nodes = vec![
            n(Direct, &[]),
            n(Eager, &[0]),
            n(Direct, &[1]),
            n(Eager, &[]),
        ];
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.steps[1].waits, vec![0]);
        assert!(p.steps[0].event && p.steps[1].event);
        assert_eq!(p.steps[2].waits, vec![1]);
        assert_eq!(p.steps[2].lane, 1);
        assert!(p.steps[3].external && p.steps[3].event);
        assert_eq!(p.ends, vec![0, 2, 3]);
    }

    #[test]
    fn empty_nodes_pass_their_dependencies_on() {
        let nodes = vec![
            n(Direct, &[]),
            n(Direct, &[]),
            n(Empty, &[0, 1]),
            n(Empty, &[2]),
            n(Direct, &[3]),
        ];
        assert_eq!(resolve_empty(&nodes).expect("resolve")[4], vec![0, 1]);
        let p = plan(&nodes, 4).expect("plan");
        assert_eq!(p.steps[4].lane, 0);
        assert_eq!(p.steps[4].waits, vec![1]);
        assert_eq!(p.ends, vec![4, 1]);
    }

    #[test]
    fn a_later_dependency_is_refused() {
        let nodes = vec![n(Direct, &[1]), n(Direct, &[])];
        assert!(plan(&nodes, 4)
            .expect_err("refused")
            .contains("node 0 depends on node 1"));
    }

    #[test]
    fn the_chooser_alternates_then_keeps_the_cheaper() {
        let mut c = BackendChooser::default();
        let mut used = Vec::new();
        while c.decided.is_none() {
            let b = c.next_is_buffer();
            used.push(b);
            // The command-buffer costs 10, the replay 30; first ones 1000.
            let first = used.iter().filter(|&&u| u == b).count() == 1;
            c.record(
                b,
                if first {
                    1000
                } else if b {
                    10
                } else {
                    30
                },
            );
        }
        assert_eq!(used.len(), 2 * (TRIALS + 1));
        assert_eq!(used[..4], [true, false, true, false]);
        assert_eq!(c.decided, Some(true));
        assert!(c.next_is_buffer());
        c.record(false, 1);
        assert_eq!(c.decided, Some(true));
        let mut c = BackendChooser::default();
        while c.decided.is_none() {
            let b = c.next_is_buffer();
            c.record(b, if b { 50 } else { 20 });
        }
        assert_eq!(c.decided, Some(false));
        assert!(!c.next_is_buffer());
    }

    #[test]
    fn unions() {
        let u = union_box(([0, 2, 0], [1, 4, 8]), ([0, 0, 4], [1, 3, 8]));
        assert_eq!(u, ([0, 0, 0], [1, 6, 12]));
        assert_eq!(union_box(u, u), u);
    }

    #[test]
    fn boxes() {
        let a = ([0, 0, 0], [4, 4, 1]);
        assert!(boxes_overlap(a, ([3, 3, 0], [2, 2, 1])));
        assert!(!boxes_overlap(a, ([4, 0, 0], [2, 2, 1])));
        assert!(!boxes_overlap(a, ([0, 0, 0], [0, 2, 1])));
    }
}
