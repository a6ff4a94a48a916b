//! Process limits the broker needs raised before it opens its logs: every segment keeps a
//! file descriptor, as in Kafka, so a broker with many partitions outgrows the usual soft
//! limit of 1024 open files long before the hard limit.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs both; returns the soft
/// limit in force afterwards. A failure is logged and the limit left as it was.
pub fn raise_open_files_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "could not read the open files limit");
        return 0;
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::warn!(error = %std::io::Error::last_os_error(), soft = before, hard = limit.rlim_max,
                "could not raise the open files limit");
        }
    }
    tracing::info!(soft_before = before, soft = limit.rlim_cur, hard = limit.rlim_max, "open files limit");
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let soft = super::raise_open_files_limit();
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!(soft, limit.rlim_cur);
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }
}
