import Cairn
let c = Change.delete(RecordID(rawValue: 1))
