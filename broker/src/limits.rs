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

/// The soft `RLIMIT_NOFILE` in force; `None` if unlimited or unreadable.
pub fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(limit.rlim_cur)
}

/// Descriptors kept free under the limit for connections, segment rolls and the files
/// opened briefly (checkpoints, snapshots): an eighth of it, at least 64.
pub fn descriptor_reserve(limit: u64) -> u64 {
    (limit / 8).max(64)
}

/// Descriptors this process has open now (`/proc/self/fd`).
pub fn open_descriptors() -> Option<u64> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64)
}

/// How many more partitions this broker can host, at one descriptor each (the active
/// segment's log file), keeping [`descriptor_reserve`] free; `None` when there is no
/// limit to speak of.
pub fn partition_headroom() -> Option<u64> {
    let limit = open_files_limit()?;
    let open = open_descriptors()?;
    Some(limit.saturating_sub(descriptor_reserve(limit)).saturating_sub(open))
}

/// The refusal of a CreateTopics or CreatePartitions that would put `replicas` more
/// partitions on this broker than its descriptors allow, if it would.
pub fn refuse_new_partitions(replicas: u64) -> Option<String> {
    let headroom = partition_headroom()?;
    if replicas <= headroom {
        return None;
    }
    let limit = open_files_limit().unwrap_or(0);
    Some(format!(
        "{replicas} new partition replicas on this broker would not fit its open files limit of {limit} \
         (room for {headroom} more, one descriptor per segment, {} kept free); raise the limit \
         (ulimit -n, or LimitNOFILE= under systemd) and restart the broker",
        descriptor_reserve(limit)
    ))
}

/// Refuses to start on a data directory whose segments (one descriptor each, as in
/// Kafka) cannot all be opened under the open files limit, in one line saying how far
/// to raise it, rather than failing half-way with "Too many open files".
pub fn check_segments_fit(data_dir: &std::path::Path) -> Result<(), String> {
    let Some(limit) = open_files_limit() else { return Ok(()) };
    let Ok(dirs) = std::fs::read_dir(data_dir) else { return Ok(()) };
    let (mut partitions, mut segments) = (0u64, 0u64);
    for dir in dirs.flatten().filter(|d| d.file_type().is_ok_and(|t| t.is_dir())) {
        let Ok(files) = std::fs::read_dir(dir.path()) else { continue };
        let n = files.flatten().filter(|f| f.file_name().to_string_lossy().ends_with(".log")).count() as u64;
        partitions += u64::from(n > 0);
        segments += n;
    }
    let needed = segments + descriptor_reserve(limit);
    if needed <= limit {
        return Ok(());
    }
    Err(format!(
        "{} holds {segments} segments in {partitions} partitions, one open file each, but the open files \
         limit is {limit}: raise it to at least {} (ulimit -n {}, or LimitNOFILE={} under systemd) and start again",
        data_dir.display(),
        needed + needed / 8,
        needed + needed / 8,
        needed + needed / 8
    ))
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

    #[test]
    fn a_data_dir_within_the_limit_passes_and_headroom_is_below_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("t-0")).unwrap();
        std::fs::write(dir.path().join("t-0").join("00000000000000000000.log"), b"").unwrap();
        assert_eq!(super::check_segments_fit(dir.path()), Ok(()));
        if let Some(limit) = super::open_files_limit() {
            assert!(super::partition_headroom().unwrap() < limit);
            assert!(
                super::refuse_new_partitions(limit).is_some(),
                "as many partitions as the limit never fit"
            );
            assert!(super::refuse_new_partitions(0).is_none());
        }
    }
}
