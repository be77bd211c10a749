import Cairn
let j = RecordJSON.self
