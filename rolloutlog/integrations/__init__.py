"""Live recorders for other orchestrators: their own objects' calls, recorded as they
happen through `rolloutlog.record.Recorder`, for `verify --policy` to check."""
