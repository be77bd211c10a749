import Cairn
let c = IndexCondition.equal([])
