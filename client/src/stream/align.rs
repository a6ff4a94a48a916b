//! Barrier alignment at a task with several inputs: once an input delivered barrier *n*
//! it is blocked (nothing more is read from it) until every input has delivered *n*;
//! then the task snapshots its state and forwards the barrier. Over FIFO channels this
//! makes the snapshot contain exactly the records before barrier *n* on every input
//! (Chandy-Lamport for a DAG whose channels are FIFO).

use super::checkpoint::CheckpointId;

/// What a barrier or a closed input did to the alignment.
///
/// ```
/// use strata_client::stream::{Aligned, Alignment};
///
/// let mut a = Alignment::new(1);
/// assert_eq!(a.on_barrier(0, 7).unwrap(), Aligned::Complete(7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aligned {
    /// Some inputs have not delivered the barrier yet.
    Waiting,
    /// Every open input delivered barrier `n`: snapshot, forward it, read on.
    Complete(CheckpointId),
}

/// The alignment state of one task with `inputs` inputs.
///
/// ```
/// use strata_client::stream::{Aligned, Alignment};
///
/// let mut a = Alignment::new(2);
/// assert_eq!(a.on_barrier(0, 1).unwrap(), Aligned::Waiting);
/// assert!(a.is_blocked(0) && !a.is_blocked(1));
/// assert_eq!(a.on_barrier(1, 1).unwrap(), Aligned::Complete(1));
/// assert!(!a.is_blocked(0));
/// ```
#[derive(Debug, Clone)]
pub struct Alignment {
    /// The barrier being aligned, if any.
    current: Option<CheckpointId>,
    /// The last barrier completed (barriers must increase).
    last: CheckpointId,
    arrived: Vec<bool>,
    closed: Vec<bool>,
}

impl Alignment {
    /// A task with `inputs` inputs (at least one), none blocked.
    pub fn new(inputs: usize) -> Alignment {
        assert!(inputs > 0, "a task has at least one input");
        Alignment { current: None, last: 0, arrived: vec![false; inputs], closed: vec![false; inputs] }
    }

    /// Whether nothing may be read from `input` now.
    pub fn is_blocked(&self, input: usize) -> bool {
        self.arrived[input] || self.closed[input]
    }

    /// Whether every input has ended.
    pub fn all_closed(&self) -> bool {
        self.closed.iter().all(|&c| c)
    }

    /// The barrier being aligned, if some input delivered it.
    pub fn pending(&self) -> Option<CheckpointId> {
        self.current
    }

    /// Barrier `id` arrived on `input`. An error means the FIFO order was broken: a
    /// barrier from a blocked input, a barrier older than the last one, or a different
    /// barrier while `current` is being aligned (an input cannot skip a barrier).
    pub fn on_barrier(&mut self, input: usize, id: CheckpointId) -> Result<Aligned, String> {
        if self.is_blocked(input) {
            return Err(format!("barrier {id} on input {input}, which is blocked or closed"));
        }
        if id <= self.last {
            return Err(format!("barrier {id} on input {input} after barrier {} completed", self.last));
        }
        match self.current {
            Some(current) if current != id => {
                return Err(format!("barrier {id} on input {input} while aligning barrier {current}"))
            }
            _ => self.current = Some(id),
        }
        self.arrived[input] = true;
        Ok(self.try_complete())
    }

    /// `input` ended: it no longer takes part in alignment (as if it had delivered every
    /// later barrier), so a pending alignment may complete now.
    pub fn on_closed(&mut self, input: usize) -> Aligned {
        self.closed[input] = true;
        self.arrived[input] = false;
        if self.current.is_some() {
            self.try_complete()
        } else {
            Aligned::Waiting
        }
    }

    fn try_complete(&mut self) -> Aligned {
        let Some(id) = self.current else { return Aligned::Waiting };
        let done = self.arrived.iter().zip(&self.closed).all(|(&a, &c)| a || c);
        if !done {
            return Aligned::Waiting;
        }
        self.arrived.iter_mut().for_each(|a| *a = false);
        self.current = None;
        self.last = id;
        Aligned::Complete(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_input_is_blocked_from_its_barrier_until_all_have_it() {
        let mut a = Alignment::new(3);
        assert_eq!(a.on_barrier(1, 1), Ok(Aligned::Waiting));
        assert_eq!((a.is_blocked(0), a.is_blocked(1), a.is_blocked(2)), (false, true, false));
        assert_eq!(a.pending(), Some(1));
        assert_eq!(a.on_barrier(0, 1), Ok(Aligned::Waiting));
        assert_eq!((a.is_blocked(0), a.is_blocked(1), a.is_blocked(2)), (true, true, false));
        assert_eq!(a.on_barrier(2, 1), Ok(Aligned::Complete(1)));
        assert!((0..3).all(|i| !a.is_blocked(i)));
        assert_eq!(a.pending(), None);
        // The next checkpoint aligns the same way, in any input order.
        assert_eq!(a.on_barrier(2, 2), Ok(Aligned::Waiting));
        assert_eq!(a.on_barrier(0, 2), Ok(Aligned::Waiting));
        assert_eq!(a.on_barrier(1, 2), Ok(Aligned::Complete(2)));
    }

    #[test]
    fn a_single_input_completes_at_once() {
        let mut a = Alignment::new(1);
        assert_eq!(a.on_barrier(0, 4), Ok(Aligned::Complete(4)));
        assert_eq!(a.on_barrier(0, 5), Ok(Aligned::Complete(5)));
    }

    #[test]
    fn a_closed_input_no_longer_holds_alignment_back() {
        let mut a = Alignment::new(2);
        assert_eq!(a.on_barrier(0, 1), Ok(Aligned::Waiting));
        assert_eq!(a.on_closed(1), Aligned::Complete(1));
        assert!(a.is_blocked(1), "a closed input is never read again");
        assert_eq!(a.on_barrier(0, 2), Ok(Aligned::Complete(2)));
        assert_eq!(a.on_closed(0), Aligned::Waiting);
        assert!(a.all_closed());
    }

    #[test]
    fn broken_fifo_order_is_an_error() {
        let mut a = Alignment::new(2);
        a.on_barrier(0, 3).unwrap();
        assert!(a.on_barrier(0, 3).is_err(), "a blocked input delivered again");
        assert!(a.on_barrier(1, 4).is_err(), "input 1 skipped barrier 3");
        assert_eq!(a.on_barrier(1, 3), Ok(Aligned::Complete(3)));
        assert!(a.on_barrier(0, 2).is_err(), "an old barrier");
        assert!(a.on_barrier(0, 3).is_err(), "a repeated barrier");
    }

    /// Every interleaving of two inputs' barriers 1..=3 completes each checkpoint exactly
    /// once, in order, at the moment its last input delivers it.
    #[test]
    fn every_interleaving_completes_each_checkpoint_once_in_order() {
        // Sequences of input indices: input i's k-th appearance is its barrier k+1.
        fn interleavings(left: [usize; 2], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if left == [0, 0] {
                out.push(prefix.clone());
                return;
            }
            for i in 0..2 {
                if left[i] > 0 {
                    let mut l = left;
                    l[i] -= 1;
                    prefix.push(i);
                    interleavings(l, prefix, out);
                    prefix.pop();
                }
            }
        }
        let mut all = Vec::new();
        interleavings([3, 3], &mut Vec::new(), &mut all);
        assert_eq!(all.len(), 20);
        for order in all {
            let mut a = Alignment::new(2);
            let mut next = [1u64, 1];
            let mut completed = Vec::new();
            let mut held: Vec<usize> = Vec::new();
            // An input that is blocked waits (its barrier stays queued) until unblocked.
            let mut queue: std::collections::VecDeque<usize> = order.into_iter().collect();
            while let Some(i) = queue.pop_front() {
                if a.is_blocked(i) {
                    held.push(i);
                    continue;
                }
                if let Aligned::Complete(id) = a.on_barrier(i, next[i]).unwrap() {
                    completed.push(id);
                    for h in held.drain(..).rev() {
                        queue.push_front(h);
                    }
                }
                next[i] += 1;
            }
            assert_eq!(completed, vec![1, 2, 3]);
        }
    }
}
