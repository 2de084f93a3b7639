//! Many children at once, and no zombie left behind. In its own test
//! binary: it scans for zombie children of this process, which other
//! tests running in parallel would create transiently.

mod common;

use common::{exists, run, zombie_children};
use spargio_process::CommandBuilder;

const CHILDREN: usize = 200;

#[test]
fn two_hundred_children_at_once_all_exit_and_are_reaped() {
    let (codes, pids) = run(|h| async move {
        let mut children: Vec<_> = (0..CHILDREN)
            .map(|_| CommandBuilder::new("true").spawn(&h).unwrap())
            .collect();
        let pids: Vec<u32> = children.iter().map(|c| c.id().unwrap()).collect();
        // All waits in flight together, each in its own task.
        let waits: Vec<_> = children
            .drain(..)
            .map(|mut child| {
                h.spawn_stealable(async move { child.wait().await.unwrap().code() })
                    .unwrap()
            })
            .collect();
        let mut codes = Vec::new();
        for wait in waits {
            codes.push(wait.await.unwrap());
        }
        (codes, pids)
    });
    assert_eq!(codes.len(), CHILDREN);
    assert!(codes.iter().all(|&c| c == Some(0)), "{codes:?}");
    let left: Vec<u32> = pids.into_iter().filter(|&pid| exists(pid)).collect();
    assert_eq!(left, Vec::<u32>::new(), "every child reaped");
    assert_eq!(zombie_children(), Vec::<u32>::new());
}
