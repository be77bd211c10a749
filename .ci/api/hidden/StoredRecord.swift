// A stored record's bytes are read through the storage layer only: the view a scan lends
// is package, and an app reads objects.
import Cairn

func readRecord(_ record: borrowing StoredRecord) throws -> Int { record.byteCount }
