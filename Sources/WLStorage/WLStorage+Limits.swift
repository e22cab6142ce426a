extension WLStorage where T == Never {
    /// The largest value, in bytes of JSON, that storages read or write: 16 MiB unless you set it.
    ///
    /// Values live in memory and files are read whole, so a file of any size would otherwise be allocated in full (a
    /// sparse file of a terabyte uses no disk). A file larger than this is not read: it is left as it is, and the
    /// storage reports ``WLStorageError/Code/valueTooLarge`` and starts from its default, which it never writes over
    /// that file. A value that encodes to more than this is not written: it stays pending, and the error is reported.
    ///
    /// It applies to the whole process, and to the command-line tool's reads. Set it early, before the storages that
    /// need a larger value are created. Values below 1 count as 1, and above 1 GiB as 1 GiB.
    public static var maximumValueSize: Int {
        get { ValueSizeLimit.maximum }
        set { ValueSizeLimit.maximum = newValue }
    }
}
