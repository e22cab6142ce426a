/// The help texts of the tool and of each command.
enum Help {
    /// The synopsis shown after a usage error.
    static func usageLine(for command: CommandName?) -> String {
        guard let command else {
            return "Usage: wlstorage [--dir DIR | --program NAME [--debug] | --suite NAME | --postgres URL"
                + " [--namespace NS] | --etcd ENDPOINTS [--namespace NS]] [--key-file PATH] COMMAND [ARGUMENTS]"
        }
        return "Usage: wlstorage [GLOBAL OPTIONS] \(synopsis(of: command))"
    }

    /// The help of the tool: what a first-time user needs in its first 25 lines, then the options.
    static let tool = """
        OVERVIEW: Inspect and edit the values that programs using WLStorage keep, one JSON file per key.

        USAGE: wlstorage [--dir DIR | --program NAME [--debug] | --suite NAME | --postgres URL [--namespace NS]
                          | --etcd ENDPOINTS [--namespace NS]] [--key-file PATH] COMMAND [ARGUMENTS]

        COMMANDS:
          get KEY...              Print the value of each KEY as JSON.
          set KEY JSON            Store a JSON value (set KEY --string TEXT stores TEXT as a JSON string).
          rm KEY                  Remove the value of KEY.
          path KEY                Print the path of the file of KEY.
          hash KEY                Print the name of the file of KEY.
          list [KEY...]           List the files (or those of each KEY): name, key, size, time, state.
          verify                  Check that every key file holds JSON.
          watch KEY               Print the value of KEY, then each new value as it changes.
          help [COMMAND|naming]   Show this help, a command's, or how keys and programs name files.

        EXAMPLES:
          wlstorage --program myapp list                  What the program myapp keeps (release build)
          wlstorage --program myapp --debug get cursor    A value of myapp's debug build (swift run)
          wlstorage --dir ./data set limit '{"max": 5}'   Store JSON
          wlstorage --dir ./data set name --string Ada    Store the string "Ada", without JSON quotes
          wlstorage --dir ./data watch limit              Print each new value of limit, until Ctrl-C

        Run 'wlstorage COMMAND --help' for a command's details, 'wlstorage help naming' for file names.

        GLOBAL OPTIONS (before the command):
          --dir DIR         The storage directory.
          --program NAME    The default directory of the program NAME (its executable's name), as the library
                            finds it: $WLSTORAGE_DIRECTORY when it is set, otherwise $XDG_DATA_HOME/NAME/.wlstorage,
                            or ~/.local/share/NAME/.wlstorage when XDG_DATA_HOME is not set.
          --debug           With --program, the folder of debug builds (swift build, swift run), .wlstorage_debug,
                            in place of .wlstorage. When only the other build's folder exists, the tool says so.
          --suite NAME      The directory of the suite NAME, as the library's .suite(NAME) names it: in
                            $WLSTORAGE_SUITES_DIRECTORY, or $XDG_DATA_HOME/wlstorage/suites, or
                            ~/.local/share/wlstorage/suites.
          --postgres URL    Work on the rows of a PostgreSQL store instead of a directory: URL is a libpq
                            connection string (postgresql://user@host/db, or host=... dbname=...). get,
                            set, rm, list, verify and watch work on the same rows, and the same JSON, as
                            WLStoragePostgresStore; path is about files. A password in URL shows in the
                            process list: use PGPASSWORD or ~/.pgpass, or give env:NAME (the string is in
                            the environment variable NAME) or file:PATH (it is the first line of the file
                            PATH).
          --etcd ENDPOINTS  Work on the keys of an etcd store instead of a directory: ENDPOINTS are the
                            client URLs of the cluster's members, separated by commas
                            (http://etcd-1:2379,http://etcd-2:2379), tried in turn. get, set, rm, list,
                            verify and watch work on the same keys, and the same JSON, as
                            WLStorageEtcdStore; path is about files. list shows the revision each key was
                            last written at (etcd keeps no time).
          --namespace NS    With --postgres or --etcd, the store's namespace ("default" when not given).
          --key-file PATH   The values are encrypted, as WLStorageEncryptedStore keeps them, with the key in
                            PATH: the base64 text of 32 bytes (44 characters, white space around them
                            ignored), or the 32 bytes themselves. 32 bytes that are all text (the hex or
                            base64 of a shorter key, a passphrase) are refused, as the library refuses them
                            in a file or in an environment variable. The file must be owned by the user
                            running the tool (root too is refused a file another user owns) and readable by
                            its owner only (mode 0600 or 0400); another owner or mode, a missing file or a
                            file without a key is an error, with exit status 1. get, set, list, verify and
                            watch then open and seal the values with the key; rm removes a value whether or
                            not it opens with the key; path and hash work as without it. With --postgres or
                            --etcd, the commands work on the values as WLStorageEncryptedStore over that
                            store does. A value sealed with another key is named by the
                            fingerprints of the key that sealed it and of the key given.
                            Without --key-file, a value sealed by WLStorageEncryptedStore (its bytes start
                            with WLSE) is recognised: set and rm leave it and exit 1, and get, list, verify
                            and watch say "sealed with key <fingerprint>; pass --key-file".
          -h, --help        Show this help.
          Without --dir, --program and --suite, $WLSTORAGE_DIRECTORY names the directory; when it is not set either,
          that is a usage error.

          Only set and watch create a missing storage directory, and only its last component, with mode
          0700; they name it on standard error. A missing parent is an error. get, rm, list and verify exit 1
          with "no storage directory at PATH"; path prints the path and says so on standard error.

        EXIT STATUS:
          0   Success.
          1   The key was not found, a file did not verify or does not open with the key, the key file
              was refused, or an operation failed.
          64  Usage error: an unknown command or option, a missing or extra argument, or an argument that
              is not UTF-8 (keys, values and paths are taken as UTF-8 text).

        """

    /// The help topic `naming`: how a key names its file, which files are temporary, and where the directories of a
    /// program and of a suite are.
    static let naming = """
        KEYS AND FILE NAMES

        A key is stored in a file named by the key when the key is 1 to 127 characters of [A-Za-z0-9._-]
        (and not ".", ".." or 64 lowercase hex digits), and by the lowercase hex SHA-256 of its UTF-8 bytes
        otherwise. So every name a key maps to is that key's file, whatever it looks like: cursor.tmp is the
        file of the key "cursor.tmp", and is listed, read and checked as that key. 'wlstorage hash KEY' prints
        the name of a key's file. list shows a file named by a hash with the key "(hashed)", unless its key is
        given: 'wlstorage list KEY' names it.

        No key's file name has a "~": the library's writers name their temporary files NAME~ followed by 16
        lowercase hex digits and .tmp, or, for the moment a rewrite exchanges its file with the one in place,
        NAME~, 16 lowercase hex digits, "-", 16 more and .xchg; only names of those forms are taken for temporary
        files. NAME~corrupt-... is a file the library moved aside because it did not decode, and
        NAME~before-type-change what a key's file held before its type changed.

        THE DIRECTORY OF A PROGRAM (--program NAME [--debug])

        $WLSTORAGE_DIRECTORY when it is set; otherwise $XDG_DATA_HOME/NAME/.wlstorage, or
        ~/.local/share/NAME/.wlstorage when XDG_DATA_HOME is not set. NAME is the name of the program's
        executable; a NAME that is not a plain file name is replaced by program-<SHA-256 of NAME>. A program built
        in debug (swift build, swift run) keeps its values in .wlstorage_debug in place of .wlstorage: give
        --debug to use that folder.

        THE DIRECTORY OF A SUITE (--suite NAME)

        $WLSTORAGE_SUITES_DIRECTORY/FOLDER when it is set (a relative path is taken from the current
        directory); otherwise $XDG_DATA_HOME/wlstorage/suites/FOLDER, or ~/.local/share/wlstorage/suites/FOLDER.
        FOLDER is NAME when NAME is a plain file name (1 to 127 characters of [A-Za-z0-9._-], not ".", ".." or 64
        hex digits, and not suite- followed by 64 hex digits), and suite-<SHA-256 of NAME> otherwise.

        """

    /// The help on `topic`, or the tool's.
    static func text(for topic: HelpTopic?) -> String {
        switch topic {
        case nil: tool
        case .naming: naming
        case .command(let command):
            "Usage: wlstorage [GLOBAL OPTIONS] \(synopsis(of: command))\n\n\(details(of: command))\n"
        }
    }

    private static func synopsis(of command: CommandName) -> String {
        switch command {
        case .get: "get KEY..."
        case .set: "set KEY JSON | set KEY --string TEXT"
        case .rm: "rm KEY"
        case .path: "path KEY"
        case .hash: "hash KEY"
        case .list: "list [KEY...]"
        case .verify: "verify"
        case .watch: "watch [--count N] KEY"
        case .help: "help [COMMAND | naming]"
        }
    }

    private static func details(of command: CommandName) -> String {
        switch command {
        case .get:
            """
            Prints the JSON stored for KEY, one member or element per line. Numbers, strings and the order of
            keys are shown exactly as stored. Exits 1 when there is no value (no file, or an empty one), the
            file does not hold JSON, or it is larger than the maximum value size the library reads (16 MiB; such
            a file is not read).

            With --key-file, the file is opened with the key first: its tag is checked against the key and
            against KEY, the key it was stored under. A file that does not open (another key, a changed or
            cut-short file, a file that is not encrypted) is an error that names the file and says why, never
            what the file holds, with exit status 1. A file sealed with another key names the fingerprints of
            the key that sealed it and of the key given.

            Without --key-file, a file that holds a value sealed by WLStorageEncryptedStore is an error that
            says so, with the fingerprint of the key that sealed it: "sealed with key <fingerprint>; pass
            --key-file", with exit status 1.

            With several keys, each value is printed on one line, KEY: JSON, in the order given. A key that has
            no value (or one that cannot be printed, for the reasons above) is said on standard error, the other
            values are still printed, and the tool exits 1.
            """
        case .set:
            """
            Stores JSON for KEY. JSON may be any JSON text, including a top-level fragment such as 42, "abc" or
            null. It is checked first, as the library reads it (Foundation's JSONSerialization): UTF-8, nested at
            most 512 deep, and every number within the range of a Double (1e400 is refused). When it is not JSON,
            the tool says why, in Foundation's words (with the byte where it tells one), and the command that
            stores it as a string, exits 1 and changes nothing. The text is stored as given, with the whitespace
            between tokens removed. The file is written as the library
            writes it: a temporary file with mode 0600, synced, renamed over the old file, and the directory
            synced. The temporary files of writers that crashed are removed first, as list removes them, and
            each is named on standard error.

            A missing storage directory is created, with mode 0700, and named on standard error. Only the
            directory itself is created: when its parent is missing, the tool exits 1 and creates nothing.

            With --key-file, the JSON is checked as above, then encrypted with the key, bound to KEY, and
            written the same way: WLSE, a version byte, the key's fingerprint, a nonce, the ciphertext and the
            tag. A value that does not open with the key is left as it is, with exit status 1 (with the wrong
            key file it would be lost for good): remove it first with rm.

            Without --key-file, a value sealed by WLStorageEncryptedStore is not replaced: the tool says which
            key sealed it and to pass --key-file, and exits 1.

            set KEY --string TEXT stores TEXT as a JSON string, quoted and escaped for you: set name --string Ada
            stores "Ada", as set name '"Ada"' does. The word after --string is TEXT, whatever it starts with.

            Give '--' before a KEY or JSON that starts with '--'.
            """
        case .rm:
            """
            Removes the file of KEY. Exits 1 when there is none. With --key-file the file is removed whether or
            not it opens with the key. Without --key-file, a value sealed by WLStorageEncryptedStore is not
            removed: the tool says which key sealed it and to pass --key-file, and exits 1.
            """
        case .path:
            """
            Prints the absolute path of the file of KEY, whether or not it exists. When the storage directory
            itself is missing, says so on standard error, and still exits 0. --key-file changes nothing: the
            file of KEY has the same name whether or not its value is encrypted.
            """
        case .hash:
            """
            Prints the name of the file KEY is stored in: KEY itself when it is 1 to 127 characters of
            [A-Za-z0-9._-] (and not ".", ".." or 64 lowercase hex digits), and the lowercase hex SHA-256 of its
            UTF-8 bytes otherwise.
            Needs no directory, and no key: --key-file is not read.
            """
        case .list:
            """
            Lists every entry of the directory with its name, its key, its size in bytes, its modification time
            (ISO 8601, UTC) and its state. With KEY..., lists only the entries of each KEY in turn: its file,
            named by KEY even when its name is a hash, and the temporary and moved-aside files that belong to it.
            A KEY without a file is listed with the state "no value (no file)", and the tool then exits 1. With
            --postgres, the rows of each KEY, and "no value (no row)" for a KEY without one; with --etcd, the
            keys, each with the revision it was last written at in place of the time, and "no value (no key)"
            for a KEY without one. The states:
              json            the file holds JSON
              empty           the file is empty; the library reads it as the default value
              invalid JSON    the file does not hold JSON the library can decode
              sealed with key <fingerprint>; pass --key-file
                              the file holds a value sealed by WLStorageEncryptedStore with that key
              too large       the file is larger than the maximum value size the library reads (16 MiB);
                              it is not read
              temporary       the temporary file of a writer at work (NAME~ and 16 lowercase hex digits and
                              .tmp, or the .xchg name of a rewrite's exchange); a name such as cursor.tmp,
                              without them, is the file of a key
              moved aside     a file the library moved aside because it did not decode
              before type change
                              what a key's file held before its type changed (NAME~before-type-change),
                              kept by the library until it has written the value in the new shape
              other           a file whose name no key maps to; the library never reads it
              symlink, directory, special file
                              not a regular file; the library neither follows nor replaces it
            The key is the name itself for a plain name (cursor.tmp is the file of the key "cursor.tmp"),
            "(hashed)" for a name of 64 lowercase hex digits (the SHA-256 of a key that is not a plain name)
            unless the key was given, and "-" for a name no key maps to. For temporary, moved-aside and
            before-type-change files it is the key of the file they belong to.

            With --key-file, each key file is opened with the key, and its state is one of:
              encrypted       the file opens with the key, and holds JSON
              encrypted, not JSON
                              the file opens with the key, but what it holds is not JSON
              does not open   the file is not a value encrypted with the key, or it was changed or cut short
              not encrypted   the file holds JSON that is not encrypted
              encrypted, not opened
                              a file named by a hash, laid out as a value encrypted with the key; the tag
                              authenticates the key it was stored under, which the name does not give, so it
                              cannot be checked (give its key, list KEY, to open it)
              empty, too large, unreadable, and the states of other entries, as above

            Before listing, the temporary files of writers that crashed are removed, with the library's own
            locks, and each is named on standard error. A rewrite that crashed in the middle of its exchange
            may have left another program's value under its .xchg name: that value is put back in place rather
            than removed, when the rewrite's file is still in place. A temporary file still listed belongs to a
            writer at work: the writer holds its lock. Nothing of another name is removed.

            Names are printed one per line whatever bytes they hold: printable characters as they are, a
            backslash as \\\\, a tab as \\t, a newline as \\n, and any other byte (control characters, DEL,
            bytes that are not UTF-8, each byte of a character that is not printable) as \\xNN in lowercase hex.
            printf '%b' turns a printed name back into the name.
            """
        case .verify:
            """
            Checks every entry of the directory. Exits 0 when every key file is a regular file that holds JSON
            the library can decode (an empty file counts as good, as the library reads it as the default value).
            Otherwise prints one line for each bad entry on standard output and exits 1. Bad entries are: files
            that do not hold JSON, files larger than the maximum value size the library reads (16 MiB), symlinks,
            directories and special files, and files whose name no key maps to (a name that is not UTF-8 never
            does). Names are printed as list prints them.

            First, the temporary files of writers that crashed are removed, as list removes them, and each is
            named in a note. A temporary file left is that of a writer at work, and is a note, not a problem
            (unless no writer holds its lock and it could not be removed). Files the library moved aside are
            notes too, and so are the bytes it keeps from before a value's type changed (NAME~before-type-change):
            the library read that value by filling in the fields it lacked from the default, or through a
            migration, and removes them once it has written the value in the new shape.

            With --key-file, a key file is good when it opens with the key (its tag is checked against the key
            and against the key it was stored under, its name) and what it holds is JSON, or when it is empty.
            A file that does not open, one that opens but does not hold JSON, and one that holds JSON that is
            not encrypted are bad. A file named by a hash (the key was not a plain name) cannot be opened
            without its key: when it is laid out as a value encrypted with this key, it is a note; otherwise
            it is bad. Nothing a file holds is printed. A file sealed with another key names the fingerprints of
            the key that sealed it and of the key given.

            Without --key-file, a file that holds a value sealed by WLStorageEncryptedStore is bad, reported as
            "sealed with key <fingerprint>; pass --key-file with that key to check it".

            With --postgres or --etcd, every row or key of the namespace is checked in the same way, as a key
            file is: it holds JSON (or nothing), or, with --key-file, a value that opens with the key and holds
            JSON.
            """
        case .watch:
            """
            Prints the value of KEY as compact JSON, one line each: first the current value, then each new
            value whenever the file changes (through inotify on the directory). A missing or empty file prints
            (missing). A value equal to the last one printed is not printed again. A file that does not hold
            JSON is reported on standard error. A missing storage directory is created as set creates it (the
            last component only, with mode 0700), so that a key can be watched before it is first stored.
            With --postgres or --etcd, the store's change feed (LISTEN, etcd's watch) tells of each change.

            Runs until it is interrupted (SIGINT and SIGTERM end it by the signal) or, with --count N, until it
            has printed N lines. Exits 1 when the directory itself is removed or moved.

            With --key-file, each value is opened with the key first; one that does not open is reported on
            standard error, without what the file holds. Without it, a value sealed by WLStorageEncryptedStore
            is reported on standard error with the fingerprint of the key that sealed it.

            OPTIONS:
              --count N     Exit with status 0 after printing N values.
            """
        case .help:
            """
            Shows the help of the tool, or of COMMAND. 'wlstorage help naming' says how a key names its file, which
            files are temporary, and where the directories of a program (--program, --debug) and of a suite are.
            """
        }
    }
}
