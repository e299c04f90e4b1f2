if obj.spec.runPolicy == nil then
  obj.spec.runPolicy = {}
end
obj.spec.runPolicy.suspend = true
return obj
