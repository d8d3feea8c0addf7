! Fortran test target: a module procedure (gfortran names it __physics_MOD_advance).
! Says "ready", reads N, calls physics::advance N times, says "ok".
module physics
  implicit none
contains
  subroutine advance(x)
    real(8), intent(inout) :: x
    x = x * 1.000001d0 + 1.0d0
  end subroutine advance
end module physics

program fmodule
  use physics
  implicit none
  integer :: i, n
  real(8) :: x
  print '(a)', 'ready'
  read (*, *) n
  x = 0
  do i = 1, n
    call advance(x)
  end do
  print '(a)', 'ok'
  if (x < 0) print *, x
end program fmodule
