import Cairn
let m = IDMap<RecordID, Int>()
