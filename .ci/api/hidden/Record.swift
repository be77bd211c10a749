import Cairn
let r = Record(id: RecordID(rawValue: 1), values: [])
