//! The per-rank plans as classes of rules (ranks whose plans read the same once every
//! target is written as the rank's `k`-th right neighbour or one fixed rank), for the
//! class fixed point of `mqd-scale`.

use crate::classes::{ClassAlternative, ClassPlan, Classes, Rule};
use crate::plan::RankPlan;
use mqd_model::{RankSet, Wait, WaitTarget};
use std::collections::{BTreeMap, HashMap};

/// The classes of the per-rank plans `plans` over `waits` (as the deadlock graph reads
/// them: a weak message to oneself holds nothing; unknown peers hold nothing).
pub(crate) fn of_plans(plans: &BTreeMap<i32, RankPlan>, waits: &[Wait]) -> Classes {
    let highest = plans
        .keys()
        .copied()
        .chain(waits.iter().filter_map(|w| match w.target {
            WaitTarget::Rank(t) => Some(t),
            _ => None,
        }))
        .max()
        .unwrap_or(-1);
    let n = u32::try_from(highest + 1).unwrap_or(0);
    // The two forms of an AND-target; the one more ranks share is kept.
    let forms = |w: &Wait| -> Option<(Rule, Rule)> {
        let WaitTarget::Rank(t) = w.target else {
            return None;
        };
        let (Ok(t), Ok(from)) = (u32::try_from(t), u32::try_from(w.from)) else {
            return None;
        };
        if t == from && w.is_weak() {
            return None;
        }
        Some((Rule::Offset((t + n - from) % n), Rule::Fixed(t)))
    };
    let mut shared: HashMap<Rule, usize> = HashMap::new();
    for (&rank, plan) in plans {
        if rank < 0 {
            continue;
        }
        for a in &plan.alternatives {
            for &i in &a.waits {
                if let Some((offset, fixed)) = forms(&waits[i]) {
                    *shared.entry(offset).or_default() += 1;
                    *shared.entry(fixed).or_default() += 1;
                }
            }
        }
    }
    let mut out = Classes {
        n,
        ..Classes::default()
    };
    let mut set_index: HashMap<&RankSet, usize> = HashMap::new();
    let mut class_index: HashMap<(bool, Vec<ClassAlternative>), usize> = HashMap::new();
    for (&rank, plan) in plans {
        let Ok(rank) = u32::try_from(rank) else {
            continue;
        };
        let alternatives = plan
            .alternatives
            .iter()
            .map(|a| {
                let mut rules: Vec<Rule> = a
                    .waits
                    .iter()
                    .map(|&i| {
                        let w = &waits[i];
                        match (&w.target, forms(w)) {
                            (WaitTarget::Rank(_), Some((offset, fixed))) => {
                                if shared[&fixed] > shared[&offset] {
                                    fixed
                                } else {
                                    offset
                                }
                            }
                            (WaitTarget::AnyOf(set), _) if !set.is_empty() => {
                                let next = out.sets.len();
                                let index = *set_index.entry(set).or_insert(next);
                                if index == next {
                                    out.sets.push(set.clone());
                                }
                                Rule::AllOf(index)
                            }
                            _ => Rule::Never,
                        }
                    })
                    .collect();
                rules.sort_unstable();
                rules.dedup();
                ClassAlternative {
                    rules,
                    unknown: a.unknown,
                    weak: Vec::new(),
                }
            })
            .collect();
        let key = (plan.sink, alternatives);
        let next = out.classes.len();
        let index = *class_index.entry(key.clone()).or_insert(next);
        if index == next {
            out.classes.push(ClassPlan {
                ranks: RankSet::new(),
                sink: key.0,
                alternatives: key.1,
            });
        }
        out.classes[index].ranks.insert(rank);
    }
    out
}

#[cfg(test)]
mod tests;
