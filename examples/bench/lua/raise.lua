local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], '+', tonumber(ARGV[4]))
if #p == 0 then return '' end
local args = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], '0'}
for _, e in ipairs(p) do args[#args + 1] = e[1] end
args[#args + 1] = 'RETRYCOUNT'
args[#args + 1] = ARGV[5]
args[#args + 1] = 'JUSTID'
redis.call(unpack(args))
return p[#p][1]
